"""Execution of dataflows on Spark."""
