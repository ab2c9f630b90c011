"""The storage replica: runs ingestions and sinks for a storage controller (spec §6.3–6.4)."""
