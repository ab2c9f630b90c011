"""The updates of the parts this client wrote, kept as Arrow for its own merges of them.

A writer has every part it writes in hand as an Arrow table before encoding it; its
compaction reads the newest parts of the shard soon after (a streaming table's appends are
merged every few writes, and each merged batch again once the newer ones match it).
:class:`PartCache` keeps the tables of the parts written through one client (appends and
compaction outputs), least recently used first out past a byte budget, so that a merge takes
them as they were written instead of fetching, verifying and decoding their blobs
(:meth:`~spate.persist._shard.ShardContext.fetch_written`; about a quarter of a merge's CPU).

Guarantee: a table served from the cache is exactly the updates encoded into that part —
part keys are unique (a fresh uuid per part) and blobs are immutable, so a key names one
content forever. Only merges take from it: every read that serves rows fetches and verifies
the blob (a corrupt blob still fails every read path; a merge of a part whose blob was
damaged after it was written writes the intact updates, and the damaged blob goes with GC).
A part the cache does not hold (evicted, another client's, another schema) is fetched and
verified as before. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

import pyarrow as pa

from spate.persist.state import BatchPart


class PartCache:
    """Arrow tables of parts written through this client, by blob key (module docs);
    ``budget_bytes`` bounds the tables' memory (0: keep nothing)."""

    def __init__(self, budget_bytes: int) -> None:
        self._budget = budget_bytes
        self._tables: OrderedDict[str, pa.Table] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        """Reads served from the cache (for tests and benchmarks)."""

    @property
    def nbytes(self) -> int:
        """Memory the kept tables take."""
        return self._bytes

    def put(self, key: str, table: pa.Table) -> None:
        """Keep ``table``, the updates just written as the part ``key`` (in the shard's
        schema, no metadata); the least recently used go past the budget."""
        size = int(table.nbytes)
        if size > self._budget:
            return
        with self._lock:
            old = self._tables.pop(key, None)
            if old is not None:
                self._bytes -= int(old.nbytes)
            self._tables[key] = table
            self._bytes += size
            while self._bytes > self._budget:
                _key, gone = self._tables.popitem(last=False)
                self._bytes -= int(gone.nbytes)

    def get(self, part: BatchPart, schema: pa.Schema) -> pa.Table | None:
        """The updates of ``part`` if kept (of ``part``'s row count and ``schema``), else
        ``None``: read the blob then."""
        with self._lock:
            table = self._tables.get(part.key)
            if table is None:
                return None
            if table.num_rows != part.num_updates or not table.schema.equals(schema):
                return None
            self._tables.move_to_end(part.key)
            self.hits += 1
            return table

    def discard(self, keys: Iterable[str]) -> None:
        """Forget these parts (replaced by a compaction: nobody reads them again)."""
        with self._lock:
            for key in keys:
                gone = self._tables.pop(key, None)
                if gone is not None:
                    self._bytes -= int(gone.nbytes)
