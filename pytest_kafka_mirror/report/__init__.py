"""Stage 5, report: what a session tells its user and keeps.

- :mod:`.summary`: the terminal summary table, JUnit properties, the plots page.
- :mod:`.storage`: stored runs (``--kafka-mirror-save``).
- :mod:`.compare`: figures and regression expressions (``--kafka-mirror-compare-fail``).
- :mod:`.plots`: SVG plots.
- :mod:`.metrics`: the Prometheus exporter and push gateway.
"""
