"""``kafka-mirror``: the pipeline's stages outside pytest (:mod:`.commands`, :mod:`.stages`)."""

from .commands import CliError, main

__all__ = ["CliError", "main"]
