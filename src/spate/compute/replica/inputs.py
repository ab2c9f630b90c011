"""The inputs of a dataflow on a replica: persist shards and this replica's own arrangements.

:class:`ReplicaInputs` is the :class:`~spate.render.input.InputResolver` of one dataflow:

* a **source import** ``s`` (a persist shard) is read through a leased reader registered when
  the dataflow is built: ``since`` is the reader's since; ``upper`` is the shard's upper as last
  seen by the replica's :class:`~spate.compute.replica.uppers.ShardUppers`; ``snapshot(as_of)``
  hands over the shard's live Parquet batches for a read at ``as_of`` (explicit files, never a
  directory); ``updates(lower, upper)`` comes from a listen started at the dataflow's as_of, so
  every step reads only the batches written since the previous one; in a dataflow whose
  exports are all subscribes, a shard of a materialized view this replica computes is read, once
  the dataflow is hydrated, from the view's :class:`~spate.compute.replica.view_feed.ViewFeed`
  (the view's computed updates, before they are written) wherever the feed covers the step, and
  its ``upper`` is then the feed's; elsewhere from persist, the listen restarted where the feed
  left off;
* an **index import** ``i`` is the arrangement of index export ``i`` of another dataflow on this
  replica (:class:`ArrangementSource`): its since and upper, its updates up to ``as_of`` for the
  snapshot, and those in ``[lower, upper)`` for a step (times past the arrangement's since are
  exact, and the replica never compacts it beyond what the importer still reads).

After each step the driver calls :meth:`ReplicaInputs.after_step` (no I/O: what the step read is
forgotten), and now and then :meth:`ReplicaInputs.downgrade_sinces`: each reader's since moves
to ``upper - 1`` (strictly below the next listen frontier, as persist requires), which renews
its lease and releases the batches the steps read (they stay valid until then, see
:mod:`spate.persist.read`). A since that lags holds compaction back a little longer, which is
always safe; a consensus write per input after every step, on the way to the step's output, is
not needed. :meth:`close` expires the readers.

All methods run on the Spark worker thread (the listen and the readers are not shared).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.compute.replica.uppers import ShardUppers
from spate.compute.replica.view_feed import ViewFeed
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, ShardId
from spate.persist.client import PersistClient
from spate.persist.error_shard import ERRORS_DESC, errors_shard, has_errors_shard
from spate.persist.read import ListenUpdates, LiveBatches, ReadHandle
from spate.plan.dataflow import DataflowDescription, IndexImport, SourceImport
from spate.repr.arrow import updates_schema
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN

if TYPE_CHECKING:
    from spate.persist.read import Listener
    from spate.render.arrangement import Arrangement  # type: ignore[import-not-found,unused-ignore]
    from spate.render.input import InputData  # type: ignore[import-not-found,unused-ignore]

_log: Final = logging.getLogger("spate.compute.replica.inputs")

SNAPSHOT_TIMEOUT_S: Final = 60.0
"""How long a snapshot waits for a shard upper the replica already saw (it should not wait)."""


class InputUnavailable(Exception):
    """An input of a dataflow cannot be read (no persist location, missing shard, gone index)."""


ArrangementSource = Callable[[GlobalId], "Arrangement"]
"""The arrangement of index export ``id`` on this replica (raises ``InputUnavailable``)."""

ViewFeeds = Callable[[ShardId], ViewFeed | None]
"""The feed of a view shard computed on this replica, if there is one."""


@dataclass
class _Source:
    imp: SourceImport
    reader: ReadHandle
    listener: Listener
    committed: int
    """Steps that succeeded read every update below this time: the next read starts here."""
    served: int
    """The upper of the last read (committed by ``after_step``; a failed step reads again)."""
    buffered: list[pa.Table] = field(default_factory=list)
    """Listened updates at times ``>= committed``."""
    listener_behind: bool = False
    """A step was read from the view's feed: the listen restarts at ``committed`` when next
    used (its frontier is behind, and the since passed it)."""


class ReplicaInputs:
    """The input resolver of one dataflow (module docs)."""

    def __init__(
        self,
        description: DataflowDescription,
        *,
        persist: PersistClient | None,
        uppers: ShardUppers,
        arrangements: ArrangementSource,
        feeds: ViewFeeds | None = None,
    ) -> None:
        as_of = description.as_of
        if as_of is None or as_of.is_empty():
            raise InputUnavailable(f"dataflow {description.debug_name!r}: no as_of")
        self._as_of: int = as_of.elements[0]
        self._uppers = uppers
        self._arrangements = arrangements
        self._feeds = feeds
        self._hydrated = False
        """A step succeeded (the snapshots are read; feeds serve only later steps)."""
        self._indexes: dict[GlobalId, IndexImport] = {i.id: i for i in description.index_imports}
        self._sources: dict[GlobalId, _Source] = {}
        self._errors: dict[GlobalId, _Source] = {}
        """The errors shards of the source imports that have one (views' errors)."""
        self._staged: list[LiveBatches] = []
        try:
            for imp in description.source_imports:
                self._sources[imp.id] = self._open(imp, persist)
                if (
                    persist is not None
                    and imp.shard is not None
                    and has_errors_shard(persist, imp.shard)
                ):
                    eimp = SourceImport(imp.id, ERRORS_DESC, errors_shard(imp.shard))
                    self._errors[imp.id] = self._open(eimp, persist)
        except BaseException:
            self.close()
            raise

    def _open(self, imp: SourceImport, persist: PersistClient | None) -> _Source:
        if imp.shard is None:
            raise InputUnavailable(f"source import {imp.id} has no shard")
        if persist is None:
            raise InputUnavailable(
                f"source import {imp.id} (shard {imp.shard}): this replica has no persist "
                "location (--persist-blob/--persist-consensus)"
            )
        reader = persist.open_leased_reader(imp.shard, imp.desc)
        try:
            listener = reader.listener(self._as_of)
        except BaseException:
            reader.expire()
            raise
        self._uppers.register(imp.shard, persist.fetch_state(imp.shard).upper)
        return _Source(imp, reader, listener, committed=self._as_of + 1, served=self._as_of + 1)

    def shards(self) -> list[tuple[GlobalId, str]]:
        return [(i, str(s.reader.shard_id)) for i, s in self._sources.items()]

    # -- InputResolver ------------------------------------------------------------------------

    def since(self, id: GlobalId) -> Frontier:
        if id in self._sources:
            return self._sources[id].reader.since
        since: Frontier = self._arrangement(id).since
        return since

    def upper(self, id: GlobalId) -> Frontier:
        if id in self._sources:
            found = self._source_upper(self._sources[id])
            if id in self._errors:  # complete only where its errors are too
                found = found.meet(self._source_upper(self._errors[id]))
            return found
        upper: Frontier = self._arrangement(id).upper
        return upper

    def snapshot(self, id: GlobalId, *, as_of: int) -> InputData:
        from spate.render.input import ArrowInput, ParquetInput  # type: ignore[import-not-found,unused-ignore]

        if id not in self._sources:
            return ArrowInput(self._index_updates(id, None, as_of + 1))
        src = self._sources[id]
        live = src.reader.live_batches(as_of, timeout=SNAPSHOT_TIMEOUT_S)
        self._staged.append(live)
        if not live.paths:
            return ArrowInput(updates_schema(src.imp.desc).empty_table())
        return ParquetInput(tuple(Path(p) for p in live.paths), 0, as_of + 1)

    def updates(self, id: GlobalId, *, lower: int, upper: int) -> InputData:
        from spate.render.input import ArrowInput  # type: ignore[import-not-found,unused-ignore]

        if id not in self._sources:
            return ArrowInput(self._index_updates(id, lower, upper))
        return ArrowInput(self._source_updates(self._sources[id], lower, upper))

    def imported_errors(
        self, id: GlobalId, *, lower: int, upper: int, first: bool
    ) -> pa.Table | None:
        """The errors of source import ``id`` (its errors shard), as the dataflow's error
        collection holds them (see :class:`spate.render.input.ImportedErrors`)."""
        from spate.render.errors import ERROR_COLUMN  # type: ignore[import-not-found,unused-ignore]

        src = self._errors.get(id)
        if src is None:
            return None
        parts: list[pa.Table] = []
        if first:
            parts.append(src.reader.snapshot(lower, timeout=SNAPSHOT_TIMEOUT_S))
            if upper > lower + 1:
                parts.append(self._source_updates(src, lower + 1, upper))
        else:
            parts.append(self._source_updates(src, lower, upper))
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        return table.rename_columns([ERROR_COLUMN, TIME_COLUMN, DIFF_COLUMN])

    # -- sources ------------------------------------------------------------------------------

    def _feed(self, src: _Source) -> ViewFeed | None:
        """The view feed that can serve ``src``'s next step, if any."""
        if self._feeds is None or not self._hydrated:
            return None
        feed = self._feeds(src.reader.shard_id)
        if feed is None or feed.closed or feed.lower > src.committed:
            return None
        return feed

    def _source_upper(self, src: _Source) -> Frontier:
        durable = self._uppers.upper(src.reader.shard_id)
        feed = self._feed(src)
        return durable if feed is None else durable.join(feed.upper)

    def _source_updates(self, src: _Source, lower: int, upper: int) -> pa.Table:
        sid = src.reader.shard_id
        if lower != src.committed:
            raise InputUnavailable(
                f"source import {src.imp.id} (shard {sid}): updates from {lower} asked, but the "
                f"next read starts at {src.committed}"
            )
        schema = updates_schema(src.imp.desc)
        feed = self._feed(src)
        if feed is not None and feed.covers(lower, upper):
            fed = feed.updates(lower, upper)
            src.buffered = []
            src.listener_behind = True
            src.served = upper
            if fed is None:
                return schema.empty_table()
            return fed.rename_columns(schema.names).cast(schema)
        if src.listener_behind:
            src.listener = src.reader.listener(lower - 1)
            src.listener_behind = False
        listener = src.listener
        while listener.frontier.less_equal(upper - 1):
            events = listener.poll_once()
            if not events:
                # The replica saw the upper pass `upper`; Consensus must show it too.
                raise InputUnavailable(
                    f"source import {src.imp.id} (shard {sid}): upper {listener.frontier} is "
                    f"not beyond {upper - 1}"
                )
            src.buffered.extend(e.updates for e in events if isinstance(e, ListenUpdates))
        if len(src.buffered) > 1:
            src.buffered = [pa.concat_tables(src.buffered)]
        table = src.buffered[0] if src.buffered else schema.empty_table()
        src.served = upper
        return table.filter(pc.less(table.column(TIME_COLUMN), upper))

    # -- index imports ------------------------------------------------------------------------

    def _arrangement(self, id: GlobalId) -> Arrangement:
        if id not in self._indexes:
            known = ", ".join(str(i) for i in [*self._sources, *self._indexes]) or "none"
            raise InputUnavailable(f"{id} is not an input of this dataflow; inputs: {known}")
        return self._arrangements(id)

    def _index_updates(self, id: GlobalId, lower: int | None, upper: int) -> pa.Table:
        from spate.render.layout import to_external  # type: ignore[import-not-found,unused-ignore]

        arr = self._arrangement(id)
        table = arr.updates()
        times = table.column(TIME_COLUMN)
        mask = pc.less(times, upper)
        if lower is not None:
            mask = pc.and_(mask, pc.greater_equal(times, lower))
        return to_external(table.filter(mask), self._indexes[id].desc)

    # -- lifecycle ----------------------------------------------------------------------------

    def after_step(self) -> None:
        """A step succeeded: forget what it read (until then a failed step can read the same
        updates again). No I/O: :meth:`downgrade_sinces` moves the readers' sinces."""
        for live in self._staged:
            live.cleanup()
        self._staged = []
        self._hydrated = True
        for src in [*self._sources.values(), *self._errors.values()]:
            if src.served > src.committed:
                src.committed = src.served
                kept = [
                    b.filter(pc.greater_equal(b.column(TIME_COLUMN), src.committed))
                    for b in src.buffered
                ]
                src.buffered = [b for b in kept if b.num_rows]

    def downgrade_sinces(self) -> None:
        """Hold each reader's since just below the next read (persist I/O; the worker thread)."""
        for src in [*self._sources.values(), *self._errors.values()]:
            try:
                src.reader.downgrade_since(Antichain.of(src.committed - 1))
            except Exception as e:  # the lease is renewed next time; reads fail if it expired
                _log.warning("shard=%s: downgrading the reader failed: %s", src.reader.shard_id, e)

    def renew_leases(self) -> None:
        """Keep the readers alive while the dataflow is idle (any thread: lease only)."""
        for src in [*self._sources.values(), *self._errors.values()]:
            src.reader.renew_lease()

    def close(self) -> None:
        for live in self._staged:
            live.cleanup()
        self._staged = []
        for src in [*self._sources.values(), *self._errors.values()]:
            self._uppers.unregister(src.reader.shard_id)
            try:
                src.reader.expire()
            except Exception as e:
                _log.info("shard=%s: expiring the reader failed: %s", src.reader.shard_id, e)
        self._sources.clear()
        self._errors.clear()
