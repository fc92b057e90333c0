"""Stage 1, produce: sequence-numbered, timestamped records at a controlled rate.

- :mod:`.records`: the wire formats (headers and the in-body ``producer-id;sequence;ts;payload``).
- :mod:`.producer`: :class:`~.producer.MirrorProducer`, its manifest and rate profile.
- :mod:`.group`: ``processes=N`` (one producer per child process).
- :mod:`.slip`: schedule slip (how far a producer runs behind its own schedule).
"""
