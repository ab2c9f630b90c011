"""The storage replica: runs ingestions and sinks for a storage controller."""
