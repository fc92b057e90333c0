"""The process layer: every child process and container the plugin starts, and their cleanup.

- :mod:`.managed`: :class:`~.managed.ManagedProcess` (process group, ``PR_SET_PDEATHSIG``,
  atexit and signal cleanup), detached processes and the registry tests check for orphans.
- :mod:`.docker`: the Docker engine (images, labelled containers, orphan reaping).
- :mod:`.supervise`: the watchdog that stops a detached child when its owner exits.

Nothing here imports the stages above it (clusters, replicators, produce, capture, verify).
"""
