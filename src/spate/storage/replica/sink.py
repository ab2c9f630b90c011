"""Running one sink: the changes of a persist collection into an external system, exactly once.

The sink's frontier lives *in the external system*, committed with the data (the Parquet
directory's manifest, the PostgreSQL progress row). A runner:

1. opens the sink and reads its committed frontier ``F``;
2. if nothing is committed (``F = {0}``), its first interval is ``[0, as_of + 1)``: the contents
   at ``as_of`` (all at time ``as_of``, when ``with_snapshot``); it then listens from
   ``as_of``. Otherwise it listens from ``F - 1``: every update at a time ``>= F``;
3. on each step, writes the updates that became final as one interval ``[F, U)`` and moves to
   ``U``; an interval the sink already committed (a replay after a crash) is skipped by the
   sink itself, so nothing is written twice and nothing is skipped;
4. stops at ``up_to``.

The runner's leased reader keeps ``from_shard`` readable at ``F - 1``; across a restart the
controller's read hold (at the sink's frontier minus one) keeps it so.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.persist.client import PersistClient
from spate.persist.errors import UpperTimeout
from spate.persist.read import Listener, ListenUpdates, ReadHandle
from spate.protocol.kafka import KafkaSinkConnection
from spate.protocol.storage import SinkStatistics
from spate.protocol.storage_desc import (
    ParquetSinkConnection,
    PostgresSinkConnection,
    SinkDescription,
)
from spate.repr.arrow import updates_schema
from spate.repr.desc import TIME_COLUMN
from spate.storage.sinks.interval import SinkError
from spate.storage.sinks.kafka.sink import KafkaSink
from spate.storage.sinks.parquet_dir import ParquetDirSink
from spate.storage.sinks.postgres import PostgresSink

_log: Final = logging.getLogger("spate.storage.sink")

Sink = ParquetDirSink | PostgresSink | KafkaSink


def progress_key(id: GlobalId, description: SinkDescription) -> str:
    """The sink's row in a PostgreSQL progress table: ``<sink id>/<input shard>``."""
    return f"{id}/{description.from_shard}"


def open_sink(id: GlobalId, description: SinkDescription) -> Sink:
    conn = description.connection
    if isinstance(conn, ParquetSinkConnection):
        return ParquetDirSink(Path(conn.directory), description.from_desc, sink=str(id))
    if isinstance(conn, PostgresSinkConnection):
        # The progress row names the sink's input shard too: sink ids repeat across
        # environments (each starts at u1), shard ids do not.
        sink = PostgresSink(
            conn, description.from_desc, sink=str(id), progress_key=progress_key(id, description)
        )
        sink.prepare()
        return sink
    if isinstance(conn, KafkaSinkConnection):
        return KafkaSink(
            conn, description.from_desc, sink=str(id), progress_key=progress_key(id, description)
        )
    raise SinkError(f"sink {id}: unknown connection {type(conn).__name__}")


class SinkRunner:
    """Writes one sink (see the module docs). Blocking; the replica runs it in threads."""

    def __init__(
        self,
        id: GlobalId,
        description: SinkDescription,
        *,
        persist: PersistClient,
        snapshot_timeout_s: float = 1.0,
    ) -> None:
        if description.as_of.is_empty():
            raise SinkError(f"sink {id}: as_of is empty; there is nothing to sink")
        self.id = id
        self.description = description
        self._persist = persist
        self._timeout = snapshot_timeout_s
        self._sink: Sink | None = None
        self._reader: ReadHandle | None = None
        self._listener: Listener | None = None
        self._pending: list[pa.Table] = []
        self._lower: Frontier = Antichain.minimum()
        self._schema = updates_schema(description.from_desc)
        self.messages_committed = 0
        self.bytes_committed = 0
        self.messages_staged = 0

    @property
    def upper(self) -> Frontier:
        """The committed frontier (``{0}`` before the sink is opened)."""
        return self._lower

    def done(self) -> bool:
        up_to = self.description.up_to
        return not up_to.is_empty() and up_to.less_equal(self._lower)

    def _open(self) -> None:
        if self._sink is not None and self._listener is not None:
            return
        d = self.description
        self._sink = open_sink(self.id, d)
        self._lower = self._sink.upper
        self._reader = self._persist.open_leased_reader(d.from_shard, d.from_desc)
        (as_of,) = d.as_of.elements
        start = self._lower.as_option()
        if start is None:
            return  # the sink is closed: nothing more to write
        self._pending = []
        if start == 0:
            if d.with_snapshot:
                self._pending.append(self._reader.snapshot(as_of, timeout=self._timeout))
            listen_from = as_of
        else:
            listen_from = start - 1
            if listen_from < as_of:
                raise SinkError(
                    f"sink {self.id}: committed frontier {self._lower} is not beyond as_of "
                    f"{d.as_of}"
                )
        self._listener = self._reader.listener(listen_from)

    def step(self) -> bool:
        """Write what became final since the last step; ``True`` if the frontier moved."""
        try:
            self._open()
        except UpperTimeout:
            return False  # the input has not reached as_of yet
        if self._listener is None or self.done():
            return False
        assert self._sink is not None and self._reader is not None
        events = self._listener.poll_once()
        progress: Frontier | None = None
        for e in events:
            if isinstance(e, ListenUpdates):
                self._pending.append(e.updates)
                self.messages_staged += e.updates.num_rows
            else:
                progress = e.upper
        if progress is None:
            return False
        if self._lower.is_empty() or not self._lower.less_than(progress):
            return False
        upper = progress
        up_to = self.description.up_to
        if not up_to.is_empty() and up_to.less_than(upper):
            upper = up_to
        table = self._batch(upper)
        self._sink.write(table, lower=self._lower, upper=upper)
        self.messages_committed += table.num_rows
        self.bytes_committed += table.nbytes
        self._lower = upper
        self._pending = []
        t = upper.as_option()
        if t is not None and t > 0:
            self._reader.downgrade_since(Antichain.of(t - 1))
        return True

    def _batch(self, upper: Frontier) -> pa.Table:
        if not self._pending:
            return self._schema.empty_table()
        table = pa.concat_tables([p.cast(self._schema) for p in self._pending])
        u = upper.as_option()
        if u is not None:
            table = table.filter(pc.less(table.column(TIME_COLUMN), u))
        return table

    def statistics(self) -> SinkStatistics:
        return SinkStatistics(
            id=self.id,
            messages_staged=self.messages_staged,
            messages_committed=self.messages_committed,
            bytes_staged=self.bytes_committed,
            bytes_committed=self.bytes_committed,
        )

    def close(self) -> None:
        if self._reader is not None:
            try:
                self._reader.expire()
            except Exception:
                _log.debug("sink %s: expiring the reader failed", self.id, exc_info=True)
        if isinstance(self._sink, (PostgresSink, KafkaSink)):
            self._sink.close()
        self._reader = None
        self._listener = None
        self._sink = None
