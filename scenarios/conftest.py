"""Scenarios are ordinary tests; the fixtures come from the pytest-kafka-mirror plugin."""
