"""The user-facing layer: catalog, timestamp oracle, Python API and command line."""
