"""Storage: the storage controller, storage replicas, sources and sinks."""
