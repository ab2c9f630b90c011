"""Small one-off reads, evaluated in the environment instead of by a one-off dataflow.

A read that no index, index lookup or collection peek answers (a join, a subquery, an
aggregate) would build a dataflow on a replica, hydrate it and peek it once: a Spark job per
operator, seconds however small the inputs. When the inputs are small it is cheaper to read
them and evaluate the plan here:

* every input is a table, a subsource or a materialized view (what a dataflow would import);
* the snapshots at the read's timestamp hold at most ``Settings.small_read_updates`` updates
  together (counted from the shards' states, before any part is fetched), or
  :data:`VECTORISED_FACTOR` times as many when the plan is one
  :mod:`spate.plan.evaluation.vectorized` evaluates (over the snapshots as Arrow tables, column
  at a time, kept in :class:`SnapshotCache` beside the rows);
* no node of the plan holds more than :data:`MAX_INTERMEDIATE_ROWS` rows on those inputs (the
  evaluation stops as soon as one would, before a join builds its pairs, and the read goes
  to a dataflow after all).

The inputs are read from persist at the timestamp (under read holds, once their uppers passed
it, as the dataflow would wait) and the plan evaluated on them, on a worker thread, by
:func:`spate.plan.evaluation.relation.evaluate`, the semantics every renderer agrees with, with
``now() = timestamp``. An evaluation error is the one a dataflow's read gives; a materialized
view that holds an error at the timestamp fails the read as its errors shard says.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.environment.catalog import MaterializedViewItem, SubsourceItem, TableItem
from spate.environment.runtime import Runtime
from spate.environment.view_failures import await_answer
from spate.errors import EvaluationFailed, QueryCanceled, ReadTimeout
from spate.frontier.antichain import Antichain
from spate.ids import GlobalId, ShardId
from spate.persist.client import PersistClient
from spate.persist.error_shard import errors_at, errors_shard
from spate.persist.read import batches_for
from spate.persist.state import HollowBatch, ShardState
from spate.plan.errors import EvalError
from spate.plan.evaluation.interrupt import interruptible
from spate.plan.evaluation.relation import Multiset, TooLarge, evaluate
from spate.plan.evaluation.vectorized import (
    MULTIPLICITY,
    CompiledPlan,
    Unsupported,
    compile_plan,
    evaluate_arrow,
    input_table,
)
from spate.plan.relation import Get, RelationExpr
from spate.repr.arrow import table_to_updates
from spate.repr.types import Datum

VECTORISED_FACTOR: Final = 10
"""A plan the vectorised evaluator covers may read this many times ``small_read_updates``
updates here: it evaluates them column at a time, tens of times faster than by rows."""

MAX_INTERMEDIATE_ROWS: Final = 250_000
"""A plan one of whose nodes holds more rows than this on the inputs read (or one of whose joins
would pair more) is left to a dataflow."""

_log: Final = logging.getLogger("spate.environment.small_reads")

_Readable = TableItem | SubsourceItem | MaterializedViewItem


async def read_here(
    rt: Runtime, plan: RelationExpr, ts: int, timeout: float
) -> Multiset | pa.Table | None:
    """The contents of ``plan`` (views inlined) at ``ts`` evaluated here, when it reads only
    small collections (module docs); ``None`` when a dataflow should compute it. A plan
    :mod:`spate.plan.evaluation.vectorized` covers is evaluated over the inputs' Arrow
    snapshots (its rows, each repeated as often as it occurs, in ``data_schema(plan.desc)``);
    anything else by the row evaluator (a multiset)."""
    limit = rt.settings.small_read_updates
    ids = sorted(plan.depends_on())
    items = [rt.catalog.find_id(i) for i in ids]
    readable = [i for i in items if isinstance(i, _Readable)]
    if limit <= 0 or not ids or len(readable) != len(ids):
        return None
    holds = rt.storage.acquire_read_holds(ids)
    try:
        for hold in holds:
            hold.try_downgrade(Antichain.of(ts))
        views = [i.id for i in readable if isinstance(i, MaterializedViewItem)]
        waiting = asyncio.ensure_future(rt.controller.wait_for_uppers(ids, ts, timeout))
        try:
            await await_answer(rt, waiting, timeout, views)
        except TimeoutError:
            raise ReadTimeout(
                f"read at {ts} was not answered within {timeout:.0f} s: the inputs' uppers "
                "have not passed it yet"
            ) from None
        compiled = _compiled(plan)
        found: pa.Table | None = None
        inputs: dict[GlobalId, Multiset] | None = None
        in_views = [i for i in readable if isinstance(i, MaterializedViewItem)]
        if compiled is not None:
            budget = limit * VECTORISED_FACTOR
            answer = await asyncio.to_thread(
                _read_evaluated, rt, ids, ts, budget, plan, compiled, in_views
            )
            if answer is None:
                return None
            found, updates, errors = answer
            if found is None and updates > limit:  # too large to evaluate by rows
                return None
        if found is None:
            read = await asyncio.to_thread(_read_rows, rt, ids, ts, limit, in_views)
            if read is None:
                return None
            inputs, errors = read
        for view, view_found in zip(in_views, errors, strict=True):
            raise_view_errors(view, view_found)
    finally:
        for hold in holds:
            hold.release()
    if found is not None:
        return found
    assert inputs is not None
    stop = threading.Event()  # set when the read is canceled: the evaluation's thread stops
    try:
        return await asyncio.to_thread(_evaluate, stop, plan, inputs, ts)
    except asyncio.CancelledError:
        stop.set()
        raise
    except TooLarge:
        return None
    except EvalError as e:  # the error a dataflow's read gives (22012, 22003 …)
        raise EvaluationFailed.of("query", e) from None
    except QueryCanceled:
        raise
    except Exception:  # an evaluator bug must not fail a read a dataflow can answer
        _log.warning(
            "evaluating a small read here failed; reading it with a dataflow", exc_info=True
        )
        return None


def _read_evaluated(
    rt: Runtime,
    ids: Sequence[GlobalId],
    ts: int,
    limit: int,
    plan: RelationExpr,
    compiled: CompiledPlan,
    views: Sequence[MaterializedViewItem],
) -> tuple[pa.Table | None, int, list[_Errors]] | None:
    """The inputs' Arrow snapshots read and ``plan`` evaluated over them (one worker thread
    call): its rows (``None``: the data need the row evaluator), the updates read (counted
    only then) and the errors of ``views``; or ``None`` (nothing fetched) when the inputs
    hold more than ``limit`` updates."""
    tables = arrow_snapshots(rt, ids, ts, limit)
    if tables is None:
        return None
    errors = [view_errors(rt, v, ts) for v in views]
    found = _evaluate_arrow(plan, tables, compiled)
    return found, 0 if found is not None else _updates(tables), errors


def _read_rows(
    rt: Runtime,
    ids: Sequence[GlobalId],
    ts: int,
    limit: int,
    views: Sequence[MaterializedViewItem],
) -> tuple[dict[GlobalId, Multiset], list[_Errors]] | None:
    """:func:`_snapshots` and the errors of ``views`` (one worker thread call)."""
    inputs = _snapshots(rt, ids, ts, limit)
    if inputs is None:
        return None
    return inputs, [view_errors(rt, v, ts) for v in views]


_Errors = list[tuple[str, int]] | None


def _updates(tables: dict[GlobalId, pa.Table]) -> int:
    return sum(int(pc.sum(t.column(MULTIPLICITY)).as_py() or 0) for t in tables.values())


def evaluate_table(
    plan: RelationExpr, base: Get, table: pa.Table, compiled: CompiledPlan
) -> pa.Table | None:
    """``plan`` over the one input ``base`` (its contents: ``table``) by the vectorised
    evaluator, or ``None`` when the data need the row evaluator."""
    return _evaluate_arrow(plan, {base.id: table}, compiled)


def vectorised(plan: RelationExpr) -> CompiledPlan | None:
    """``plan`` compiled for :func:`evaluate_arrow`, or ``None`` when it is not covered."""
    return _compiled(plan)


def _compiled(plan: RelationExpr) -> CompiledPlan | None:
    """``plan`` compiled for :func:`evaluate_arrow`, or ``None`` when it is not covered.
    Kept for the plans read last (by equality: a statement planned again gives an equal plan;
    a compiled plan holds no data, only the plan's ids, columns and expressions)."""
    try:
        return _compiled_cached(plan)
    except TypeError:  # a plan holding something unhashable: compiled each time
        return _compile(plan)


@functools.lru_cache(maxsize=512)
def _compiled_cached(plan: RelationExpr) -> CompiledPlan | None:
    return _compile(plan)


def _compile(plan: RelationExpr) -> CompiledPlan | None:
    try:
        return compile_plan(plan, MAX_INTERMEDIATE_ROWS)
    except Unsupported:
        return None


def _evaluate_arrow(
    plan: RelationExpr, tables: dict[GlobalId, pa.Table], compiled: CompiledPlan
) -> pa.Table | None:
    """``plan`` over ``tables``, or ``None`` when the data need the row evaluator (an
    overflow, which it reports naming the row; a join too large, which it reports as such)."""
    try:
        return evaluate_arrow(plan, tables, compiled=compiled)
    except (Unsupported, TooLarge):
        return None
    except Exception:  # a kernel refused what the row evaluator takes (or a bug): let it
        _log.warning("a vectorised small read failed; evaluating it by rows", exc_info=True)
        return None


def _evaluate(
    stop: threading.Event, plan: RelationExpr, inputs: dict[GlobalId, Multiset], ts: int
) -> Multiset:
    with interruptible(stop):
        return evaluate(plan, inputs, ts, max_rows=MAX_INTERMEDIATE_ROWS)


def _snapshots(
    rt: Runtime,
    ids: Sequence[GlobalId],
    ts: int,
    limit: int,
    only: tuple[int, tuple[Datum, ...]] | None = None,
) -> dict[GlobalId, Multiset] | None:
    """Each input's contents at ``ts`` (their uppers passed it), or ``None`` (nothing fetched)
    when they are too large for :func:`read_here`. Contents complete at ``ts`` come from
    :class:`SnapshotCache` when their batches have not changed since they were read."""
    metas = [rt.storage.collection_metadata(id) for id in ids]
    states = [rt.persist.fetch_state(m.shard) for m in metas]
    if any(s.upper.less_equal(ts) for s in states):  # not final at ts in this state: wait
        return _read_snapshots(rt, ids, ts, limit)
    found = [batches_for(s, ts) for s in states]
    if sum(b.num_updates for batches in found for b in batches) > limit:
        return None
    cache = _cache_of(rt)
    out: dict[GlobalId, Multiset] = {}
    missing: list[tuple[GlobalId, ShardId, tuple[str, ...] | None]] = []
    for id, meta, batches in zip(ids, metas, found, strict=True):
        key = complete_key(batches, ts)
        if only is not None and key is not None:
            index = cache.index(meta.shard, key, only[0])
            if index is not None:
                out[id] = _pick(index, only[1])
                continue
        hit = cache.get(meta.shard, key)
        if hit is not None:
            out[id] = _select_rows(hit, only) if only is not None else Counter(hit)
        else:
            missing.append((id, meta.shard, key))
    if missing:
        read = _read_snapshots(rt, [id for id, _, _ in missing], ts, _NO_LIMIT)
        assert read is not None
        for id, shard, key in missing:
            out[id] = read[id]
            if key is not None:
                cache.put(shard, key, Counter(read[id]))
            if only is not None:
                out[id] = _select_rows(read[id], only)
    if only is not None:
        for _id, meta, batches in zip(ids, metas, found, strict=True):
            key = complete_key(batches, ts)
            if key is not None and cache.index(meta.shard, key, only[0]) is None:
                cache.build_index(meta.shard, key, only[0])
    return out


def arrow_snapshots(
    rt: Runtime, ids: Sequence[GlobalId], ts: int, limit: int
) -> dict[GlobalId, pa.Table] | None:
    """:func:`_snapshots` as inputs of :func:`evaluate_arrow`, converted once per version
    of each shard's contents (:class:`SnapshotCache` keeps them beside the rows)."""
    metas = [rt.storage.collection_metadata(id) for id in ids]
    states = [rt.persist.fetch_state(m.shard) for m in metas]
    if any(s.upper.less_equal(ts) for s in states):
        read = _read_snapshots(rt, ids, ts, limit)
        if read is None:
            return None
        return {id: input_table(m.desc, read[id]) for id, m in zip(ids, metas, strict=True)}
    found = [batches_for(s, ts) for s in states]
    if sum(b.num_updates for batches in found for b in batches) > limit:
        return None
    cache = _cache_of(rt)
    out: dict[GlobalId, pa.Table] = {}
    missing = []
    for id, meta, batches in zip(ids, metas, found, strict=True):
        key = complete_key(batches, ts)
        hit = cache.get_table(meta.shard, key)
        if hit is not None:
            out[id] = hit
        else:
            missing.append((id, meta, key))
    if missing:
        read = _snapshots(rt, [id for id, _, _ in missing], ts, _NO_LIMIT)
        assert read is not None
        for id, meta, key in missing:
            out[id] = table = input_table(meta.desc, read[id])
            if key is not None:
                cache.put_table(meta.shard, key, table)
    return out


def _select_rows(contents: Multiset, only: tuple[int, tuple[Datum, ...]]) -> Multiset:
    column, values = only
    wanted = set(values)
    return Counter({r: n for r, n in contents.items() if r[column] in wanted})


def _pick(index: dict[Datum, Multiset], values: tuple[Datum, ...]) -> Multiset:
    out: Multiset = Counter()
    for v in dict.fromkeys(values):
        out.update(index.get(v, {}))
    return out


def complete_key(batches: Sequence[HollowBatch], ts: int) -> tuple[str, ...] | None:
    """The parts of ``batches`` when every update in them is at a time ``<= ts`` (their
    contents at ``ts`` are then their contents at any later time, whatever the later time);
    else ``None``."""
    for b in batches:
        upper = b.upper.as_option()
        if upper is None or upper > ts + 1:
            return None
    return tuple(p.key for b in batches for p in b.parts)


class SnapshotCache:
    """The last contents read here of each shard, keyed by the parts they were read from.

    Parts are immutable and a key is stored only for batches whose updates are all at or
    before the read's timestamp, so a hit is exactly the contents a read of those parts at any
    later timestamp gives. A write or a compaction makes new parts: a new key, a miss."""

    def __init__(self, max_shards: int = 256, max_rows: int = 1_000_000) -> None:
        self._max = max_shards
        self._max_rows = max_rows
        """Rows kept at most, over all shards (reads may fetch 100k each, column at a time)."""
        self._entries: dict[ShardId, tuple[tuple[str, ...], Multiset]] = {}
        self._indexes: dict[tuple[ShardId, int], tuple[tuple[str, ...], dict[Datum, Multiset]]]
        self._indexes = {}
        self._tables: dict[ShardId, tuple[tuple[str, ...], pa.Table]] = {}
        self._lock = threading.Lock()

    def index(
        self, shard: ShardId, key: tuple[str, ...], column: int
    ) -> dict[Datum, Multiset] | None:
        """The cached contents of ``shard`` (read from the parts ``key``) by ``column``."""
        with self._lock:
            entry = self._indexes.get((shard, column))
        return entry[1] if entry is not None and entry[0] == key else None

    def build_index(self, shard: ShardId, key: tuple[str, ...], column: int) -> None:
        """Index the cached contents of ``shard`` by ``column`` (if they are those of ``key``)."""
        contents = self.get(shard, key)
        if contents is None:
            return
        by: dict[Datum, Multiset] = {}
        for row, n in contents.items():
            by.setdefault(row[column], Counter())[row] = n
        with self._lock:
            if shard in self._entries:
                self._indexes[(shard, column)] = (key, by)

    def get_table(self, shard: ShardId, key: tuple[str, ...] | None) -> pa.Table | None:
        """The cached contents of ``shard`` (read from the parts ``key``) as an input of
        :func:`evaluate_arrow`."""
        if key is None:
            return None
        with self._lock:
            entry = self._tables.get(shard)
        return entry[1] if entry is not None and entry[0] == key else None

    def put_table(self, shard: ShardId, key: tuple[str, ...], table: pa.Table) -> None:
        with self._lock:
            if shard in self._entries and self._entries[shard][0] == key:
                self._tables[shard] = (key, table)

    def get(self, shard: ShardId, key: tuple[str, ...] | None) -> Multiset | None:
        if key is None:
            return None
        with self._lock:
            entry = self._entries.get(shard)
        return entry[1] if entry is not None and entry[0] == key else None

    def put(self, shard: ShardId, key: tuple[str, ...], contents: Multiset) -> None:
        with self._lock:
            self._entries.pop(shard, None)
            rows = len(contents) + sum(len(c) for _, c in self._entries.values())
            while self._entries and (len(self._entries) >= self._max or rows > self._max_rows):
                oldest = next(iter(self._entries))  # the oldest
                rows -= len(self._entries.pop(oldest)[1])
            self._entries[shard] = (key, contents)
            alive = self._entries
            self._indexes = {k: v for k, v in self._indexes.items() if k[0] in alive}
            self._tables = {k: v for k, v in self._tables.items() if k in alive and k != shard}


_CACHES: Final[weakref.WeakKeyDictionary[PersistClient, SnapshotCache]] = (
    weakref.WeakKeyDictionary()
)
"""One cache per persist client (one per open environment)."""
_CACHES_LOCK: Final = threading.Lock()


def _cache_of(rt: Runtime) -> SnapshotCache:
    with _CACHES_LOCK:
        cache = _CACHES.get(rt.persist)
        if cache is None:
            cache = _CACHES[rt.persist] = SnapshotCache()
        return cache


def _read_snapshots(
    rt: Runtime, ids: Sequence[GlobalId], ts: int, limit: int
) -> dict[GlobalId, Multiset] | None:
    """:func:`_snapshots` read through leased readers (they wait for the uppers)."""
    readers = []
    try:
        for id in ids:
            meta = rt.storage.collection_metadata(id)
            readers.append(rt.persist.open_leased_reader(meta.shard, meta.desc))
        if sum(r.snapshot_updates(ts) for r in readers) > limit:
            return None
        out: dict[GlobalId, Multiset] = {}
        for id, reader in zip(ids, readers, strict=True):
            contents = out[id] = Counter()
            for row, _t, diff in table_to_updates(reader.snapshot(ts)):
                contents[row] += diff
        return out
    finally:
        for reader in readers:
            reader.expire()


def snapshot_here(
    rt: Runtime,
    id: GlobalId,
    ts: int,
    limit: int | None,
    only: tuple[int, tuple[Datum, ...]] | None = None,
) -> Multiset | None:
    """The contents of collection ``id`` at ``ts`` (its upper passed it, the caller holds it)
    read here, or ``None`` (nothing fetched) when it holds more than ``limit`` updates. With
    ``only = (column, values)``: just the rows whose ``column`` is one of ``values``, found
    through a hash index of the cached contents on that column."""
    found = _snapshots(rt, [id], ts, _NO_LIMIT if limit is None else limit, only)
    return None if found is None else found[id]


_NO_LIMIT: Final = 2**63


def lookup_seen(
    rt: Runtime, id: GlobalId, ts: int, limit: int, only: tuple[int, tuple[Datum, ...]]
) -> Multiset | None:
    """:func:`snapshot_here` of ``only``'s rows when it needs no I/O: answered from the
    shard's state this process last saw (no Consensus read) when that state's upper is past
    ``ts`` (its contents at ``ts`` are then final: the same in every later state) and its
    parts at ``ts`` are cached here indexed by ``only``'s column; ``None`` otherwise (the
    caller reads as :func:`snapshot_here` does). Safe on the event loop. The caller holds the
    collection at ``ts``."""
    return lookup_seen_in(rt, rt.storage.collection_metadata(id).shard, ts, limit, only)


def lookup_seen_in(
    rt: Runtime, shard: ShardId, ts: int, limit: int, only: tuple[int, tuple[Datum, ...]]
) -> Multiset | None:
    """:func:`lookup_seen` of the collection whose shard is ``shard``."""
    seen = seen_index(rt, shard, ts, limit, only[0])
    return None if seen is None else _pick(seen.index, only[1])


@dataclass(frozen=True, slots=True)
class SeenIndex:
    """The contents of a shard at every timestamp ``t`` with ``lo <= t < hi`` as its
    ``state`` (the state this process saw last) has them, final there, indexed by a column:
    each value's rows and their counts. They were read from ``updates`` updates."""

    state: ShardState
    lo: int
    hi: int
    updates: int
    index: dict[Datum, Multiset]


def seen_index(rt: Runtime, shard: ShardId, ts: int, limit: int, column: int) -> SeenIndex | None:
    """The contents at ``ts`` of the shard ``shard`` by ``column``, as :func:`lookup_seen_in`
    finds them, and the timestamps from ``ts`` on at which the same state has the same
    contents (until its upper or the next batch with updates after ``ts``); ``None`` when
    :func:`lookup_seen_in` would give ``None``."""
    state = _final_seen_state(rt, shard, ts)
    if state is None:
        return None
    found = batches_for(state, ts)
    updates = sum(b.num_updates for b in found)
    if updates > limit:
        return None
    key = complete_key(found, ts)
    if key is None:
        return None
    index = _cache_of(rt).index(shard, key, column)
    if index is None:
        return None
    return SeenIndex(state, ts, _same_until(state, ts), updates, index)


def _final_seen_state(rt: Runtime, shard: ShardId, ts: int) -> ShardState | None:
    """The state of ``shard`` this process saw last (no Consensus read) when its contents at
    ``ts`` are final there (its upper past ``ts``) and readable (its since at or below it)."""
    state = rt.persist.seen_state(shard)
    if state is None or state.upper.less_equal(ts) or not state.since.less_equal(ts):
        return None
    return state


def _same_until(state: ShardState, ts: int) -> int:
    """The first timestamp after ``ts`` at which ``state`` may have other contents than at
    ``ts``: its upper, or the lower of its first batch with updates after ``ts``."""
    upper = state.upper.as_option()
    until = _NO_LIMIT if upper is None else upper
    for b in state.batches:
        if b.parts and not b.lower.less_equal(ts):
            lower = b.lower.as_option()
            if lower is not None and lower < until:
                until = lower
    return until


LOOP_ROWS: Final = 20_000
"""Inputs of at most this many rows in all, whose contents at the read's timestamp are cached,
are evaluated where the read is (:func:`evaluate_seen`, :func:`contents_seen`): on the SQL
session's thread, or on the event loop for a read through ``Environment.select``; a vectorised
evaluation of them takes less than the thread switches of a worker thread call."""


def _seen_key(rt: Runtime, id: GlobalId, ts: int) -> tuple[ShardId, tuple[str, ...]] | None:
    """The shard of collection ``id`` and the parts of its contents at ``ts`` when the
    shard's state this process last saw (no Consensus read) is final at ``ts`` (its upper
    past it) and readable there (its since at or below it), and, for a materialized view, its
    errors shard is known to hold no error at ``ts``; else ``None``."""
    item = rt.catalog.find_id(id)
    if not isinstance(item, _Readable):
        return None
    if isinstance(item, MaterializedViewItem) and not no_errors_seen(rt, item, ts):
        return None
    shard = rt.storage.collection_metadata(id).shard
    state = _final_seen_state(rt, shard, ts)
    if state is None:
        return None
    key = complete_key(batches_for(state, ts), ts)
    return None if key is None else (shard, key)


def contents_seen(rt: Runtime, id: GlobalId, ts: int) -> Multiset | None:
    """:func:`snapshot_here` of the whole collection when it needs no I/O (as
    :func:`lookup_seen`: from the state last seen, the contents cached here) and holds at
    most :data:`LOOP_ROWS` rows; else ``None``. Safe on the event loop; needs no read hold
    (it does not wait: nothing compacts the collection meanwhile)."""
    seen = _seen_key(rt, id, ts)
    if seen is None:
        return None
    contents = _cache_of(rt).get(*seen)
    if contents is None or len(contents) > LOOP_ROWS:
        return None
    return Counter(contents)


def evaluate_seen(rt: Runtime, plan: RelationExpr, ts: int) -> pa.Table | None:
    """:func:`read_here` of a plan the vectorised evaluator covers when it needs no I/O and
    no worker thread: every input's contents at ``ts`` are known from the state last seen
    and cached as Arrow tables (as :func:`contents_seen`), at most :data:`LOOP_ROWS` rows in
    all, and the evaluator answers; else ``None`` (the caller reads as :func:`read_here`
    does, which says the same or fails as it should). Safe on the event loop; needs no read
    holds."""
    ids = sorted(plan.depends_on())
    if rt.settings.small_read_updates <= 0 or not ids:
        return None
    compiled = _compiled(plan)
    if compiled is None:
        return None
    cache = _cache_of(rt)
    tables: dict[GlobalId, pa.Table] = {}
    rows = 0
    for id in ids:
        seen = _seen_key(rt, id, ts)
        table = None if seen is None else cache.get_table(*seen)
        if table is None:
            return None
        rows += table.num_rows
        if rows > LOOP_ROWS:
            return None
        tables[id] = table
    return _evaluate_arrow(plan, tables, compiled)


def no_errors_seen(rt: Runtime, item: MaterializedViewItem, timestamp: int) -> bool:
    """Whether the view's errors shard is known, without I/O, to hold no error at
    ``timestamp``: the state of it this process last saw has its upper past ``timestamp``
    and no batch at or before it (``False``: ask :func:`view_errors`)."""
    shard = errors_shard(rt.storage.collection_metadata(item.id).shard)
    return no_errors_seen_in(rt, shard, timestamp)


def no_errors_seen_in(rt: Runtime, shard: ShardId, timestamp: int) -> bool:
    """:func:`no_errors_seen` of a view whose errors shard is ``shard``."""
    return no_errors_until(rt, shard, timestamp) is not None


def no_errors_until(rt: Runtime, shard: ShardId, timestamp: int) -> tuple[ShardState, int] | None:
    """For :func:`no_errors_seen_in` true at ``timestamp``: the errors shard's state seen
    last and the first timestamp at which that state may hold an error (it holds none at
    any timestamp before it); ``None`` when :func:`no_errors_seen_in` is false."""
    state = rt.persist.seen_state(shard)
    if state is None or state.upper.less_equal(timestamp) or batches_for(state, timestamp):
        return None
    return state, _same_until(state, timestamp)


def _errors_at(
    persist: PersistClient, shard: ShardId, timestamp: int
) -> list[tuple[str, int]] | None:
    """:func:`errors_at`, without opening a reader when the errors shard holds no update at
    or before ``timestamp`` (the common case: no error)."""
    state = persist.fetch_state(errors_shard(shard))
    if not batches_for(state, timestamp):
        return None
    return errors_at(persist, shard, timestamp)


async def check_errors_shard(rt: Runtime, item: MaterializedViewItem, timestamp: int) -> None:
    """Raise :class:`EvaluationFailed` if the view is in error at ``timestamp`` (its errors
    shard, :mod:`spate.persist.error_shard`, is not empty there)."""
    raise_view_errors(item, await asyncio.to_thread(view_errors, rt, item, timestamp))


def view_errors(
    rt: Runtime, item: MaterializedViewItem, timestamp: int
) -> list[tuple[str, int]] | None:
    """The errors of the view at ``timestamp`` (blocking: read on a worker thread, where the
    read of its contents runs too), for :func:`raise_view_errors`."""
    shard = rt.storage.collection_metadata(item.id).shard
    return _errors_at(rt.persist, shard, timestamp)


def raise_view_errors(item: MaterializedViewItem, found: list[tuple[str, int]] | None) -> None:
    """Raise :class:`EvaluationFailed` naming the view when ``found`` holds errors."""
    if found:
        count = sum(n for _, n in found)
        raise EvaluationFailed.of_record(f"materialized view {item.name}", found[0][0], count)


@dataclass(frozen=True, slots=True)
class SeenContents:
    """The contents of a shard at every timestamp ``t`` with ``lo <= t < hi`` as its
    ``state`` (the state this process saw last) has them, final there: those of the parts
    ``key`` (immutable), ``updates`` updates."""

    state: ShardState
    lo: int
    hi: int
    updates: int
    key: tuple[str, ...]


def seen_contents(rt: Runtime, shard: ShardId, ts: int) -> SeenContents | None:
    """Which contents the shard ``shard`` has at ``ts`` in the state of it this process saw
    last (no I/O), when they are final there (its upper past ``ts``), readable (its since at
    or below it) and every update of them is at or before ``ts``; else ``None``. Two calls
    that give the same ``key`` saw the same contents."""
    state = _final_seen_state(rt, shard, ts)
    if state is None:
        return None
    found = batches_for(state, ts)
    key = complete_key(found, ts)
    if key is None:
        return None
    updates = sum(b.num_updates for b in found)
    return SeenContents(state, ts, _same_until(state, ts), updates, key)


def cached_contents(
    rt: Runtime, id: GlobalId, seen: SeenContents, *, arrow: bool
) -> Multiset | pa.Table | None:
    """The contents of collection ``id`` ``seen`` found, when they are cached here (no
    I/O): as an input of :func:`evaluate_arrow` (``arrow``, converted from the cached rows
    and kept when only those are cached) or as rows (not to be changed); else ``None``."""
    cache = _cache_of(rt)
    meta = rt.storage.collection_metadata(id)
    if not arrow:
        return cache.get(meta.shard, seen.key)
    table = cache.get_table(meta.shard, seen.key)
    if table is None:
        rows = cache.get(meta.shard, seen.key)
        if rows is None:
            return None
        table = input_table(meta.desc, rows)
        cache.put_table(meta.shard, seen.key, table)
    return table


def evaluate_tables(
    plan: RelationExpr, tables: dict[GlobalId, pa.Table], compiled: CompiledPlan
) -> pa.Table | None:
    """``plan`` over ``tables`` by the vectorised evaluator (as :func:`evaluate_seen`
    evaluates it), or ``None`` when the data need the row evaluator."""
    return _evaluate_arrow(plan, tables, compiled)
