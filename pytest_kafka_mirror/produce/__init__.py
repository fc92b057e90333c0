"""Stage 1, produce: sequence-numbered, timestamped records at a controlled rate.

- :mod:`.records`: the wire formats (headers and the in-body ``producer-id;sequence;ts;payload``).
- :mod:`.producer`: :class:`~.producer.MirrorProducer` (client, warm-up, the send loop); every
  name of the modules below that it used to hold is still importable from it.
- :mod:`.profile`: what a run is asked for: topics and lanes, the rate profile, argument checks.
- :mod:`.manifest`: the send state per topic and what the manifest says (lanes, stats, live counts).
- :mod:`.lag`: when a producer that falls behind its schedule warns.
- :mod:`.group`: ``processes=N`` (one producer per child process).
- :mod:`.slip`: schedule slip (how far a producer runs behind its own schedule).
"""
