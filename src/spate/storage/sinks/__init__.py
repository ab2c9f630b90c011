"""Sinks: exactly-once exports of a collection to external systems."""
