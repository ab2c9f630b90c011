"""Tuning knobs of persist (defaults suit the embedded deployment)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MINUTE_MS: Final = 60_000


@dataclass(frozen=True, slots=True)
class PersistConfig:
    """How persist clients behave. Every field has a safe default.

    * ``reader_lease_ms`` / ``writer_lease_ms``: a handle that neither heartbeats nor writes for
      this long is expired by the next state change of anyone on the shard.
    * ``maintenance``: run compaction and GC automatically after writes and since downgrades
      (after the CaS committed; a maintenance failure never fails the write).
    * ``background_maintenance``: a writer's maintenance runs on a background thread of the
      client after its append returns, instead of inline before (the append's caller does not
      wait for compaction; several appends in a row share one pass).
    * ``compaction_factor``: size-tiered merging — a batch is merged with the newer batches after
      it when its size is at most ``factor ×`` theirs together. With 1 each tier at least
      doubles: a streaming table's writes (1,500 updates each into 100k rows) are rewritten
      ~3.4-4.6 times each over 300-3,000 writes instead of ~4-5.6 with 2, for 2-3 more
      batches at most (12-15 instead of 10-12).
    * ``gc_every``: run GC after this many state changes made through one client on a shard
      (and after every compaction).
    * ``location_retries``: consecutive Blob/Consensus failures retried (with backoff from
      ``backoff_base_s`` to ``backoff_max_s``) before the error reaches the caller.
    * ``poll_interval_s`` / ``poll_max_s``: how often a waiting read or a listen polls consensus.
    * ``zstd_level``: Parquet compression level of batches.
    * ``part_max_rows``: compaction splits its output into parts of at most this many rows.
    * ``fetch_threads``: parallel blob fetches of one read.
    * ``staging_dir``: where Spark reads of non-file blobs are staged (``None``: the temp dir).
    * ``part_cache_bytes``: memory for the Arrow tables of parts this client wrote, which its
      own later reads of them (compaction, mostly) take instead of decoding the blob
      (:mod:`spate.persist.part_cache`; 0: none).
    """

    reader_lease_ms: int = 15 * MINUTE_MS
    writer_lease_ms: int = 15 * MINUTE_MS
    maintenance: bool = True
    background_maintenance: bool = True
    compaction_factor: float = 1.0
    compaction_min_inputs: int = 8
    compaction_min_bytes: int = 8 * 2**20
    gc_every: int = 16
    location_retries: int = 8
    backoff_base_s: float = 0.005
    backoff_max_s: float = 1.0
    poll_interval_s: float = 0.005
    poll_max_s: float = 0.25
    zstd_level: int = 1
    part_max_rows: int = 4_000_000
    fetch_threads: int = 4
    staging_dir: str | None = None
    part_cache_bytes: int = 64 * 2**20

    def __post_init__(self) -> None:
        for name in (
            "reader_lease_ms",
            "writer_lease_ms",
            "gc_every",
            "part_max_rows",
            "fetch_threads",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"PersistConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.location_retries < 0:
            raise ValueError(
                f"PersistConfig.location_retries must be >= 0, got {self.location_retries}"
            )
        if self.compaction_min_inputs < 2:
            raise ValueError(
                "PersistConfig.compaction_min_inputs must be >= 2, "
                f"got {self.compaction_min_inputs}"
            )
        if self.part_cache_bytes < 0:
            raise ValueError(
                f"PersistConfig.part_cache_bytes must be >= 0, got {self.part_cache_bytes}"
            )
        if self.compaction_min_bytes < 0:
            raise ValueError(
                f"PersistConfig.compaction_min_bytes must be >= 0, got {self.compaction_min_bytes}"
            )
        if self.compaction_factor <= 0:
            raise ValueError(
                f"PersistConfig.compaction_factor must be > 0, got {self.compaction_factor}"
            )
