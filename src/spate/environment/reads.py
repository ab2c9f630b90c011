"""Reads: SELECT (a peek) and SUBSCRIBE (a stream of changes).

**Timestamps.** A read defaults to ``max(oracle.read_ts(), since of every input)``: it observes
every acknowledged write (strict serializability) and is still readable. The read timestamp
follows the wall clock (the table tick), so the peek waits until the inputs' uppers pass it:
the answer is as fresh as the present, at the cost of waiting out the inputs' lag. A
``serializable`` read instead takes the latest time every input has completed (``upper - 1``,
at least the since): it never waits for freshness, but may miss writes acknowledged since. An
explicit ``as_of`` below an input's since is an error naming both.

**Paths**, cheapest first:

1. the target has an index on a cluster with replicas — peek the index (no Spark job); a plan
   that filters an indexed object by the index key peeks only those keys (see
   :mod:`spate.environment.lookup`), and concurrent lookups at one timestamp share one read
   (:mod:`spate.environment.lookup_batch`);
2. the target is a storage collection (table, subsource, materialized view) — peek its shard
   through a replica of a cluster ("fast path"), or read it here when there is no cluster;
3. anything else (a view, an ad-hoc plan) — a one-time dataflow on a cluster: build the plan at
   the timestamp into an arrangement, peek it, drop it; or, when the inputs are small, read
   them and evaluate the plan here (:mod:`spate.environment.small_reads`; a read with
   ``small_reads=False`` always builds the dataflow).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeVar, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.compute.controller.responses import SubscribeResponse
from spate.environment import introspection, read_plan, subscriptions
from spate.environment.builtins import builtin_by_id
from spate.environment.catalog import (
    IndexItem,
    MaterializedViewItem,
    SubsourceItem,
    item_desc,
    kind_of,
)
from spate.environment.changes import Changes, changes_of, row_type
from spate.environment.clusters import cluster_for
from spate.environment.lookup_batch import batcher_of
from spate.environment.objects import check_plan
from spate.environment.planning import (
    inline_views,
    select_dataflow,
    storage_inputs,
    subscribe_dataflow,
)
from spate.environment.recency import await_recency
from spate.environment.runtime import Runtime
from spate.environment.small_reads import (
    VECTORISED_FACTOR,
    arrow_snapshots,
    contents_seen,
    evaluate_seen,
    evaluate_table,
    lookup_seen,
    no_errors_seen,
    raise_view_errors,
    read_here,
    snapshot_here,
    vectorised,
    view_errors,
)
from spate.environment.tables import advance_tables
from spate.environment.view_failures import await_answer
from spate.errors import (
    EvaluationFailed,
    InvalidReadArgument,
    Problem,
    ReadTimeout,
    SpateError,
    UsageError,
    check_argument,
    reported,
)
from spate.errors import ReadBeforeSince as ReadBeforeSince
from spate.errors import ReadFailed as ReadFailed
from spate.frontier.antichain import Antichain, Frontier
from spate.frontier.read_hold import ReadHold
from spate.ids import GlobalId, PeekId
from spate.plan.errors import EvalError
from spate.plan.evaluation.relation import Multiset, evaluate
from spate.plan.evaluation.vectorized import CompiledPlan
from spate.plan.finishing import ColumnOrder, RowSetFinishing
from spate.plan.relation import Get, RelationExpr
from spate.protocol.compute import IndexTarget, PeekError, PeekRows, PersistTarget
from spate.repr.arrow import arrow_rows, data_schema, to_user
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import Datum, Row, ScalarKind

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Target:
    plan: RelationExpr
    name: str


def resolve(rt: Runtime, target: str | RelationExpr) -> Target:
    if isinstance(target, str):
        item = rt.catalog.get(target)
        desc = item_desc(item)
        if desc is None or isinstance(item, IndexItem):
            raise UsageError(f"cannot read {kind_of(item)} {target}")
        return Target(Get(item.id, desc), target)
    if not isinstance(target, RelationExpr):
        raise UsageError(f"read a name or a plan, not {type(target).__name__}")
    check_plan(rt, target)
    read = rt.catalog.find_id(target.id) if isinstance(target, Get) else None
    return Target(target, "query" if read is None else read.name)


Isolation = Literal["strict serializable", "serializable"]
ISOLATION_LEVELS: Final[tuple[str, ...]] = get_args(Isolation)


def check_isolation(isolation: str) -> Isolation:
    if isolation == "strict serializable":
        return "strict serializable"
    if isolation == "serializable":
        return "serializable"
    raise UsageError(f"isolation {isolation!r} is not one of {', '.join(ISOLATION_LEVELS)}")


@dataclass(frozen=True, slots=True)
class ReadInput:
    """A collection a read depends on: its name (for errors), since and upper."""

    name: str
    since: Frontier
    upper: Frontier


def _index_input(rt: Runtime, item: IndexItem) -> ReadInput:
    f = rt.compute.collection_frontiers(item.id, rt.instance_of(item.cluster))
    return ReadInput(item.name, f.read_frontier, f.write_frontier)


def _storage_input(rt: Runtime, id: GlobalId, name: str) -> ReadInput:
    f = rt.storage.collection_frontiers(id)
    return ReadInput(name, f.since, f.upper)


_MAX_TIME: Final = 2**63 - 1


def _check_time(value: object, what: str) -> None:
    if value is not None:
        check_argument(value, int, what)
        assert isinstance(value, int)
        if not 0 <= value <= _MAX_TIME:
            raise InvalidReadArgument(f"{what} must be a timestamp in 0..2**63-1, got {value}")


def _check_read_arguments(as_of: object, limit: object, order_by: object, timeout: object) -> None:
    _check_time(as_of, "as_of")
    if limit is not None:
        check_argument(limit, int, "limit")
    check_argument(order_by, (list, tuple), "order_by (column names)")
    assert isinstance(order_by, (list, tuple))
    for o in order_by:
        check_argument(o, str, "an order_by column")
    check_argument(timeout, (int, float), "timeout (seconds)")
    assert isinstance(timeout, (int, float))
    if not timeout > 0:
        raise InvalidReadArgument(f"timeout must be more than 0 s, got {timeout}")


async def _introspection_time(rt: Runtime, plan: RelationExpr) -> int | None:
    """For a read of ``spate_catalog`` relations: write them now and return a time that
    observes what they say now and every acknowledged write (``None``: the plan reads none).

    They are written every second, with rows stated before each write: a read at the oracle's
    read timestamp could see rows stated before a change that time already includes."""
    system = [i for i in plan.depends_on() if builtin_by_id(i) is not None]
    if not system:
        return None
    await rt.storage.write_introspection()
    uppers = [rt.storage.collection_frontiers(i).upper.as_option() for i in system]
    written = min((u - 1 for u in uppers if u is not None), default=0)
    return max(rt.oracle.read_ts(), written)


async def _await_first_ingestion(rt: Runtime, plan: RelationExpr, timeout: float) -> None:
    """Make what a source found when it was created visible to this read: wait until each
    subsource the read depends on has ingested for the first time (its upper left 0; the
    first step binds the source's snapshot), then advance the read timestamp past it."""
    waiting = [
        item
        for id in storage_inputs(inline_views(plan, rt.catalog))
        if isinstance(item := rt.catalog.find_id(id), SubsourceItem)
        and rt.storage.collection_frontiers(id).upper.as_option() == 0
    ]
    if not waiting:
        return
    try:
        await rt.controller.wait_for_uppers([i.id for i in waiting], 0, timeout)
    except TimeoutError:
        names = ", ".join(i.name for i in waiting)
        raise ReadTimeout(
            f"{names} ingested nothing within {timeout:.0f} s of this read (is the source "
            "reachable? see status())"
        ) from None
    await advance_tables(rt)


def _pick_timestamp(
    rt: Runtime,
    inputs: Sequence[ReadInput],
    as_of: int | None,
    isolation: Isolation = "strict serializable",
) -> int:
    latest_since = 0
    for i in inputs:
        t = i.since.as_option()
        if t is None:
            raise ReadBeforeSince(i.name, since=i.since, timestamp=None)
        if as_of is not None and as_of < t:
            raise ReadBeforeSince(
                i.name,
                since=i.since,
                timestamp=as_of,
                detail="those times have been compacted away (see set_retain_history)",
            )
        latest_since = max(latest_since, t)
    if as_of is not None:
        return as_of
    if isolation == "serializable":
        complete = [u - 1 for i in inputs if (u := i.upper.as_option()) is not None]
        freshest = min(complete) if complete else rt.oracle.read_ts()
        return max(freshest, latest_since)
    return max(rt.oracle.read_ts(), latest_since)


def expand(table: pa.Table, desc: RelationDesc) -> pa.Table:
    """Rows with multiplicity ``n`` repeated ``n`` times; the data columns only."""
    if DIFF_COLUMN not in table.column_names:
        return table.select(desc.names)
    diffs = table.column(DIFF_COLUMN)
    if pc.min(diffs).as_py() is not None and pc.min(diffs).as_py() < 0:
        raise ReadFailed("a read returned negative multiplicities (the collection is not a set)")
    counts = diffs.to_numpy()
    if (counts == 1).all():
        return table.select(desc.names)
    indices = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return table.select(desc.names).take(pa.array(indices))


def _finishing(desc: RelationDesc, order_by: Sequence[str], limit: int | None) -> RowSetFinishing:
    orders = []
    for spec in order_by:
        descending = spec.startswith("-")
        orders.append(ColumnOrder(desc.index_of(spec.lstrip("-")), desc=descending))
    return RowSetFinishing(order_by=tuple(orders), limit=limit)


async def _peek(
    rt: Runtime,
    cluster: str,
    target: IndexTarget | PersistTarget,
    timestamp: int,
    desc: RelationDesc,
    finishing: RowSetFinishing,
    timeout: float,
    literal_constraints: tuple[Row, ...] | None = None,
    reads: Sequence[GlobalId] = (),
) -> pa.Table:
    """``target`` at ``timestamp``; fails at once if a materialized view it reads (``reads``,
    or the target's own collection) is computed by no replica any more."""
    watched = list(reads)
    if isinstance(target, PersistTarget):
        watched.append(target.id)
    elif isinstance(index := rt.catalog.find_id(target.id), IndexItem):
        watched.append(index.on)
    instance = rt.instance_of(cluster)
    uuid = PeekId.new(rt.ids)
    future = rt.compute.peek(
        instance,
        target,
        uuid,
        timestamp,
        result_desc=desc,
        finishing=finishing,
        literal_constraints=literal_constraints,
    )
    try:
        result = await await_answer(rt, future, timeout, watched)
    except TimeoutError:
        raise ReadTimeout(
            f"read at {timestamp} was not answered within {timeout:.0f} s: the inputs' uppers "
            "have not passed it yet, or no replica of cluster "
            f"{cluster} is running (check status())"
        ) from None
    if isinstance(result, PeekRows):
        return expand(result.rows, desc)
    if isinstance(result, PeekError):
        raise reported(Problem(result.message, result.sqlstate, result.pg_message))
    raise ReadFailed("the read was canceled")


async def select(
    rt: Runtime,
    target: str | RelationExpr,
    *,
    as_of: int | None,
    cluster: str | None,
    order_by: Sequence[str] = (),
    limit: int | None = None,
    timeout: float = 60.0,
    isolation: str = "strict serializable",
    real_time_recency: bool = False,
    small_reads: bool = True,
) -> pa.Table:
    _check_read_arguments(as_of, limit, order_by, timeout)
    check_argument(real_time_recency, bool, "real_time_recency")
    check_argument(small_reads, bool, "small_reads")
    level = check_isolation(isolation)
    t = resolve(rt, target)
    try:
        table = await _select(
            rt, t, as_of, cluster, order_by, limit, timeout, level, real_time_recency, small_reads
        )
        return to_user(table, t.plan.desc)
    except EvaluationFailed as e:
        raise EvaluationFailed(f"reading {t.name}: {e}", e.sqlstate, e.pg_message) from None


async def _select(
    rt: Runtime,
    t: Target,
    as_of: int | None,
    cluster: str | None,
    order_by: Sequence[str],
    limit: int | None,
    timeout: float,
    level: Isolation,
    real_time_recency: bool,
    small_reads: bool,
) -> pa.Table:
    finishing = _finishing(t.plan.desc, order_by, limit)
    if as_of is None and level == "strict serializable":
        await _await_first_ingestion(rt, t.plan, timeout)
    if real_time_recency:
        if as_of is not None:
            raise InvalidReadArgument("real_time_recency reads the present: it takes no as_of")
        await await_recency(rt, t.plan, timeout)
    if as_of is None and level == "strict serializable":
        as_of = await _introspection_time(rt, inline_views(t.plan, rt.catalog))
    route = read_plan.plan_read(rt, t.plan, cluster, small_reads=small_reads)
    return await execute_read(
        rt, route, as_of=as_of, finishing=finishing, timeout=timeout, isolation=level
    )


class LocalEvaluationFailed(EvaluationFailed):
    """An evaluation error of a read evaluated in this process, its message already naming
    what was read (as a dataflow's read error would)."""


def evaluate_constant(plan: RelationExpr, now: int) -> list[tuple[Row, int]]:
    """A :class:`~spate.environment.read_plan.Constant` read, evaluated at ``now``."""
    try:
        return list(evaluate(plan, {}, now).items())
    except EvalError as e:  # the error a dataflow's read gives (22012, 22003 …)
        failed = EvaluationFailed.of("query", e)
        raise LocalEvaluationFailed(str(failed), failed.sqlstate, failed.pg_message) from None


def _apply(
    rt: Runtime, plan: RelationExpr, base: Get, contents: Multiset, now: int
) -> list[tuple[Row, int]]:
    """``plan`` over the rows ``contents`` read for ``base``."""
    try:
        return list(evaluate(plan, {base.id: contents}, now).items())
    except EvalError as e:
        name = rt.catalog.by_id(base.id).name
        failed = EvaluationFailed.of(f"reading {name}", e)
        raise LocalEvaluationFailed(str(failed), failed.sqlstate, failed.pg_message) from None


def _contents(table: pa.Table) -> Multiset:
    """The rows of a peek's answer (one per unit of multiplicity) as a multiset."""
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return Counter(tuple(c[i] for c in columns) for i in range(table.num_rows))


async def execute_read(
    rt: Runtime,
    route: read_plan.ReadPlan,
    *,
    as_of: int | None,
    finishing: RowSetFinishing,
    timeout: float,
    isolation: Isolation,
) -> pa.Table:
    """Carry out the read ``route`` (chosen by :func:`~spate.environment.read_plan.plan_read`)
    at ``as_of`` (``None``: the timestamp ``isolation`` picks); the rows of ``route.plan``
    with ``finishing`` applied, in the plan's data schema."""
    desc = route.plan.desc
    match route:
        case read_plan.Constant(plan=plan):
            now = as_of if as_of is not None else rt.oracle.read_ts()
            return _rows_table(desc, evaluate_constant(plan, now), finishing)
        case read_plan.Introspection(plan=plan):
            inputs = [_storage_input(rt, i, str(i)) for i in storage_inputs(plan)]
            ts = _pick_timestamp(rt, inputs, as_of, isolation)
            counts = await introspection.evaluate_here(rt, plan, ts, timeout)
            return _rows_table(desc, list(counts.items()), finishing)
        case read_plan.FastPathLookup(plan=plan, index=index, base=base, constraints=keys):
            if keys and route.here_up_to > 0:
                item = rt.catalog.by_id(base.id)
                assert isinstance(item, read_plan.StorageItem)
                holds, ts = _held_timestamp(rt, [item.id], as_of, isolation, {item.id: item.name})
                try:
                    here = await _lookup_here(rt, item, ts, timeout, route)
                finally:
                    _release(holds)
                if here is not None:
                    found = _apply(rt, plan, base, here, rt.oracle.read_ts())
                    return _rows_table(desc, found, finishing)
            ts = _pick_timestamp(rt, [_index_input(rt, index)], as_of, isolation)
            if not keys:
                return _rows_table(desc, [], finishing)
            rows = await _lookup_peek(rt, index, base, ts, timeout, keys)
            found = _apply(rt, plan, base, _contents(rows), rt.oracle.read_ts())
            return _rows_table(desc, found, finishing)
        case read_plan.FastPathScan(plan=plan, index=index, base=base):
            ts = _pick_timestamp(rt, [_index_input(rt, index)], as_of, isolation)
            target = IndexTarget(index.id)
            if plan is base:
                return await _peek(rt, index.cluster, target, ts, desc, finishing, timeout)
            rows = await _peek(rt, index.cluster, target, ts, base.desc, RowSetFinishing(), timeout)
            found = _apply(rt, plan, base, _contents(rows), rt.oracle.read_ts())
            return _rows_table(desc, found, finishing)
        case read_plan.PersistRead():
            return await _persist_read(rt, route, as_of, finishing, timeout, isolation)
        case read_plan.InProcess(plan=plan, otherwise=dataflow):
            return await _select_dataflow(
                rt, plan, as_of, dataflow.cluster, finishing, timeout, isolation, True
            )
        case read_plan.OneOffDataflow(plan=plan, cluster=cluster):
            return await _select_dataflow(
                rt, plan, as_of, cluster, finishing, timeout, isolation, False
            )


async def _lookup_here(
    rt: Runtime,
    item: read_plan.StorageItem,
    ts: int,
    timeout: float,
    route: read_plan.FastPathLookup,
) -> Multiset | None:
    """The rows of ``item`` at ``ts`` a lookup needs, read here (:func:`_read_here`); lookups
    of the same column of ``item`` at ``ts`` made meanwhile share one read of the union of
    their values (:mod:`spate.environment.lookup_batch`: each applies its plan after)."""
    if route.only is None:
        return await _read_here(rt, item, ts, timeout, route.here_up_to, None)
    column, values = route.only
    limit = route.here_up_to
    # answered on this loop, without a worker thread or a Consensus read, when the shard's
    # state seen last is final at ts and its contents are cached by the column
    seen = lookup_seen(rt, item.id, ts, limit, route.only)
    if seen is not None and (
        not isinstance(item, MaterializedViewItem) or no_errors_seen(rt, item, ts)
    ):
        return seen

    async def read(union: list[Datum]) -> Multiset | None:
        return await _read_here(rt, item, ts, timeout, limit, (column, tuple(union)))

    key = ("here", item.id, ts, limit, column, timeout)
    return await batcher_of(rt).read(key, values, read)


async def _lookup_peek(
    rt: Runtime,
    index: IndexItem,
    base: Get,
    ts: int,
    timeout: float,
    keys: tuple[Row, ...],
) -> pa.Table:
    """The rows of ``index`` at ``ts`` with the key values ``keys``, peeked from a replica;
    lookups of ``index`` at ``ts`` made meanwhile share one peek of the union of their keys
    (:mod:`spate.environment.lookup_batch`: each applies its plan after)."""

    async def peek(union: list[Row]) -> pa.Table:
        target = IndexTarget(index.id)
        finishing = RowSetFinishing()
        return await _peek(
            rt, index.cluster, target, ts, base.desc, finishing, timeout, tuple(union)
        )

    return await batcher_of(rt).read(("peek", index.id, ts, timeout), keys, peek)


async def _read_here(
    rt: Runtime,
    item: read_plan.StorageItem,
    ts: int,
    timeout: float,
    limit: int | None,
    only: tuple[int, tuple[Datum, ...]] | None,
) -> Multiset | None:
    """The contents of ``item`` at ``ts`` (only the rows ``only`` selects) read here once its
    upper passed ``ts``, or ``None`` when it holds more than ``limit`` updates; a materialized
    view in error at ``ts`` fails the read as its errors shard says."""
    return await _held_read(rt, item, ts, timeout, snapshot_here, limit, only)


async def _evaluate_here(
    rt: Runtime,
    item: read_plan.StorageItem,
    ts: int,
    timeout: float,
    limit: int | None,
    plan: RelationExpr,
    base: Get,
    compiled: CompiledPlan,
) -> pa.Table | None:
    """``plan`` over the contents of ``item`` (``base``) at ``ts``, read as :func:`_read_here`
    reads them and evaluated by the vectorised evaluator in the same worker thread call; or
    ``None`` when they hold more than ``limit`` updates or the data need the row evaluator."""

    def read(rt: Runtime, id: GlobalId, ts: int, limit: int | None) -> pa.Table | None:
        found = arrow_snapshots(rt, [id], ts, _NO_LIMIT if limit is None else limit)
        return None if found is None else evaluate_table(plan, base, found[id], compiled)

    return await _held_read(rt, item, ts, timeout, read, limit)


async def _held_read(
    rt: Runtime,
    item: read_plan.StorageItem,
    ts: int,
    timeout: float,
    read: Callable[..., _T | None],
    *args: object,
) -> _T | None:
    """``read(rt, item.id, ts, *args)`` on a worker thread once the collection's upper passed
    ``ts``; a materialized view in error at ``ts`` fails the read. The caller holds the
    collection at ``ts`` (from choosing ``ts`` until this returns)."""
    try:
        await rt.controller.wait_for_uppers([item.id], ts, timeout)
    except TimeoutError as e:
        raise ReadTimeout(f"read of {item.name} at {ts}: {e}") from None
    view = item if isinstance(item, MaterializedViewItem) else None

    def read_checked() -> tuple[_T | None, list[tuple[str, int]] | None]:
        contents = read(rt, item.id, ts, *args)
        if contents is None or view is None:
            return contents, None
        return contents, view_errors(rt, view, ts)

    # one worker-thread call for the contents and the view's errors
    contents, errors = await asyncio.to_thread(read_checked)
    if view is not None:
        raise_view_errors(view, errors)
    return contents


_NO_LIMIT: Final = 2**63


async def _persist_read(
    rt: Runtime,
    route: read_plan.PersistRead,
    as_of: int | None,
    finishing: RowSetFinishing,
    timeout: float,
    isolation: Isolation,
) -> pa.Table:
    """A :class:`~spate.environment.read_plan.PersistRead`: the snapshot read here when it is
    small or no cluster has replicas, else peeked by a replica; the plan applied here."""
    item, base, plan = route.item, route.base, route.plan
    seen = _persist_seen(rt, route, as_of, finishing, isolation)
    if seen is not None:
        return seen
    # Held at ts until answered: finding the cluster may wait (the default cluster is created
    # on first need) and the collection's read policy would compact it past ts meanwhile.
    holds, ts = _held_timestamp(rt, [item.id], as_of, isolation, {item.id: item.name})
    try:
        contents: Multiset | None = None
        if route.may_read_here:
            limit = route.here_up_to if route.cluster is not None else None
            compiled = vectorised(plan) if route.only is None else None
            if compiled is not None:
                budget = None if limit is None else limit * VECTORISED_FACTOR
                found = await _evaluate_here(rt, item, ts, timeout, budget, plan, base, compiled)
                if found is not None:
                    return _finished(found, finishing)
            contents = await _read_here(rt, item, ts, timeout, limit, route.only)
        if contents is None:
            assert route.cluster is not None
            name = await cluster_for(rt, route.cluster)
            shard = rt.storage.collection_metadata(item.id).shard
            target = PersistTarget(item.id, shard, base.desc)
            if plan is base:
                return await _peek(rt, name, target, ts, base.desc, finishing, timeout)
            rows = await _peek(rt, name, target, ts, base.desc, RowSetFinishing(), timeout)
            contents = _contents(rows)
    finally:
        _release(holds)
    if plan is base:
        return _rows_table(plan.desc, list(contents.items()), finishing)
    found = _apply(rt, plan, base, contents, rt.oracle.read_ts())
    return _rows_table(plan.desc, found, finishing)


def _persist_seen(
    rt: Runtime,
    route: read_plan.PersistRead,
    as_of: int | None,
    finishing: RowSetFinishing,
    isolation: Isolation,
) -> pa.Table | None:
    """A :class:`~spate.environment.read_plan.PersistRead` answered on the event loop, before
    anything awaits, when the collection's contents at the timestamp are cached here and
    final in the state last seen (:func:`~spate.environment.small_reads.contents_seen`): no
    read hold, no worker thread; ``None``: read as usual (also when a replica reads it)."""
    item, base, plan = route.item, route.base, route.plan
    if isinstance(item, read_plan.IntrospectionItem) or not route.may_read_here:
        return None
    ts = _seen_timestamp(rt, [item.id], as_of, isolation)
    if ts is None:
        return None
    limit = route.here_up_to if route.cluster is not None else _NO_LIMIT
    if route.only is not None:
        contents = lookup_seen(rt, item.id, ts, limit, route.only)
        if isinstance(item, MaterializedViewItem) and not no_errors_seen(rt, item, ts):
            contents = None
    elif plan is not base and vectorised(plan) is not None:  # not by rows: far slower
        found = evaluate_seen(rt, plan, ts)
        return None if found is None else _finished(found, finishing)
    else:
        contents = contents_seen(rt, item.id, ts)
    if contents is None or sum(contents.values()) > limit:
        return None
    if plan is not base:
        return _rows_table(
            plan.desc, _apply(rt, plan, base, contents, rt.oracle.read_ts()), finishing
        )
    return _rows_table(plan.desc, list(contents.items()), finishing)


def _rows_table(
    desc: RelationDesc, rows: list[tuple[Row, int]], finishing: RowSetFinishing
) -> pa.Table:
    expanded = [r for r, n in rows for _ in range(n)]
    return _finished(rows_table(desc, expanded), finishing)


def rows_table(desc: RelationDesc, rows: Sequence[Row]) -> pa.Table:
    """``rows`` of ``desc`` as a table of its data schema, built a column at a time (as
    ``pa.Table.from_pylist`` of :func:`arrow_rows` builds it, at a tenth of the cost for a
    few rows: a lookup's answer)."""
    schema = data_schema(desc)
    values = arrow_rows(desc, rows) if _has_interval(desc) else None
    columns = [
        pa.array(
            [r[i] for r in rows] if values is None else [v[f.name] for v in values],
            type=f.type,
        )
        for i, f in enumerate(schema)
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _has_interval(desc: RelationDesc) -> bool:
    return any(c.type.kind is ScalarKind.INTERVAL for c in desc.columns)


def _finished(table: pa.Table, finishing: RowSetFinishing) -> pa.Table:
    """``finishing`` applied to the rows of a read (a table of its data schema)."""
    desc_names = table.column_names
    if finishing.order_by:
        keys = [
            (desc_names[o.column], "descending" if o.desc else "ascending")
            for o in finishing.order_by
        ]
        table = table.sort_by(keys)
    if finishing.limit is not None:
        table = table.slice(finishing.offset, finishing.limit)
    return table


async def _select_dataflow(
    rt: Runtime,
    plan: RelationExpr,
    as_of: int | None,
    cluster: str | None,
    finishing: RowSetFinishing,
    timeout: float,
    isolation: Isolation,
    small_reads: bool,
) -> pa.Table:
    if small_reads:
        seen = _dataflow_seen(rt, plan, as_of, cluster, finishing, isolation)
        if seen is not None:
            return seen
    inlined = inline_views(plan, rt.catalog)
    # Hold the inputs before choosing the timestamp, until the dataflow holds them itself: the
    # read here awaits (and may give up on a large join), and meanwhile the inputs' read
    # policies would compact them past the timestamp (the dataflow's as_of).
    holds, ts = _held_timestamp(rt, storage_inputs(inlined), as_of, isolation)
    try:
        if small_reads and _reads_here(rt, cluster):
            here = await read_here(rt, inlined, ts, timeout)
            if isinstance(here, pa.Table):
                return _finished(here, finishing)
            if here is not None:
                return _rows_table(inlined.desc, list(here.items()), finishing)
        name = await cluster_for(rt, cluster)
        instance = rt.instance_of(name)
        build, index = rt.transient_id(), rt.transient_id()
        df = select_dataflow(inlined, rt.catalog, ts, build_id=build, index_id=index)
        rt.compute.create_dataflow(instance, df)
    finally:
        _release(holds)
    try:
        reads = sorted(inlined.depends_on())
        target = IndexTarget(index)
        return await _peek(rt, name, target, ts, inlined.desc, finishing, timeout, reads=reads)
    finally:
        rt.compute.drop_collections(instance, [index])


def select_seen(
    rt: Runtime, route: read_plan.ReadPlan, *, as_of: int | None, isolation: Isolation
) -> pa.Table | None:
    """:func:`select` of ``route`` (a read of tables, subsources or materialized views in
    this process) carried out without awaiting anything, on the calling thread: no hop to the
    event loop, no read holds, no worker thread. Answered when the inputs' contents at the
    timestamp the read picks are cached here and final in the shard states last seen
    (:func:`_persist_seen`, :func:`_dataflow_seen`); ``None``: read with :func:`select`.

    Safe off the loop: the timestamp is the oracle's read timestamp (every write acknowledged
    before this call) or later, the states consulted are ones the shards had (read under their
    locks) with their uppers past it, and their contents there are final."""
    finishing = RowSetFinishing()
    try:
        match route:
            case read_plan.PersistRead(plan=plan):
                found = _persist_seen(rt, route, as_of, finishing, isolation)
            case read_plan.InProcess(plan=plan, otherwise=dataflow):
                found = _dataflow_seen(rt, plan, as_of, dataflow.cluster, finishing, isolation)
            case _:
                return None
    except (SpateError, LookupError):  # a cluster or collection gone meanwhile: select says so
        return None
    return None if found is None else to_user(found, plan.desc)


def _dataflow_seen(
    rt: Runtime,
    plan: RelationExpr,
    as_of: int | None,
    cluster: str | None,
    finishing: RowSetFinishing,
    isolation: Isolation,
) -> pa.Table | None:
    """A read of ``plan`` that would build a dataflow, or be read here, answered before
    anything awaits (:func:`~spate.environment.small_reads.evaluate_seen`); ``None``: read
    as usual."""
    if not _reads_here(rt, cluster):
        return None
    inlined = inline_views(plan, rt.catalog)
    ids = storage_inputs(inlined)
    if any(builtin_by_id(i) is not None for i in ids):
        return None
    ts = _seen_timestamp(rt, ids, as_of, isolation)
    found = None if ts is None else evaluate_seen(rt, inlined, ts)
    return None if found is None else _finished(found, finishing)


def _reads_here(rt: Runtime, cluster: str | None) -> bool:
    """Whether a small one-off read on ``cluster`` may be answered here: the cluster has
    replicas (else it waits for them), or no cluster exists yet and none is named (read here
    before creating one)."""
    none = cluster is None and not rt.catalog.clusters
    return none or bool(rt.catalog.cluster(rt.default_cluster(cluster)).replicas)


def _seen_timestamp(
    rt: Runtime, ids: Sequence[GlobalId], as_of: int | None, isolation: Isolation
) -> int | None:
    """The timestamp :func:`_held_timestamp` would choose now, without read holds, for a read
    answered before anything awaits (from contents cached here: nothing can compact the inputs
    meanwhile); ``None`` when choosing it fails (the held read raises the error)."""
    try:
        return _pick_timestamp(rt, [_storage_input(rt, i, str(i)) for i in ids], as_of, isolation)
    except SpateError:
        return None


def _held_timestamp(
    rt: Runtime,
    ids: Sequence[GlobalId],
    as_of: int | None,
    isolation: Isolation = "strict serializable",
    names: Mapping[GlobalId, str] | None = None,
) -> tuple[list[ReadHold], int]:
    """Read holds on ``ids`` and the timestamp a read of them goes at, the holds moved up to
    it: held from before the timestamp is chosen, so that their read policies cannot compact
    them past it while the read awaits (finding or creating its cluster, waiting for uppers,
    giving up on reading here). The caller releases them (:func:`_release`) once the read or
    its dataflow holds what it needs."""
    holds = _hold_inputs(rt, ids, names)
    try:
        inputs = [
            ReadInput(
                (names or {}).get(h.id, str(h.id)),
                h.since,
                rt.storage.collection_frontiers(h.id).upper,
            )
            for h in holds
        ]
        ts = _pick_timestamp(rt, inputs, as_of, isolation)
        for hold in holds:
            hold.try_downgrade(Antichain.of(ts))
    except BaseException:
        _release(holds)
        raise
    return holds, ts


def _release(holds: Sequence[ReadHold]) -> None:
    for hold in holds:
        hold.release()


def _hold_inputs(
    rt: Runtime, ids: Sequence[GlobalId], names: Mapping[GlobalId, str] | None = None
) -> list[ReadHold]:
    """A read hold on each collection at its since; a collection gone (compacted away
    entirely, or dropped) is :class:`ReadBeforeSince` naming it (by ``names``, else its id),
    as a read of it would be."""
    for id in ids:
        since = rt.storage.collection_frontiers(id).since
        if since.is_empty():
            name = (names or {}).get(id, str(id))
            raise ReadBeforeSince(name, since=since, timestamp=None)
    return rt.storage.acquire_read_holds(ids)


async def subscribe(
    rt: Runtime,
    target: str | RelationExpr,
    *,
    as_of: int | None,
    up_to: int | None,
    cluster: str | None,
    with_snapshot: bool = True,
    progress: bool = False,
) -> AsyncGenerator[Changes, None]:
    """Yield the changes of ``target`` from ``as_of`` on, one :class:`Changes` per closed
    interval; intervals without changes only with ``progress``."""
    _check_time(as_of, "as_of")
    _check_time(up_to, "up_to")
    t = resolve(rt, target)
    if as_of is None:
        await _await_first_ingestion(rt, t.plan, 60.0)
    inlined = inline_views(t.plan, rt.catalog)
    # Held from before the timestamp is chosen until the dataflow holds them: finding the
    # cluster may wait (the default cluster is created on first need), and meanwhile the
    # inputs' read policies would compact them past the as_of (DataflowSinceViolation).
    holds, ts = _held_timestamp(rt, storage_inputs(inlined), as_of)
    try:
        if up_to is not None and up_to <= ts:
            raise UsageError(f"subscribe up_to {up_to} must be beyond its as_of {ts}")
        name = await cluster_for(rt, cluster)
        instance = rt.instance_of(name)
        build, sink = rt.transient_id(), rt.transient_id()
        queue = rt.controller.subscribe_queue(sink)
        df = subscribe_dataflow(
            inlined,
            rt.catalog,
            ts,
            build_id=build,
            sink_id=sink,
            up_to=up_to,
            with_snapshot=with_snapshot,
        )
        rt.compute.create_dataflow(instance, df)
    finally:
        _release(holds)
    # A drop of anything it reads ends it with an error naming what was dropped.
    reads_ids = subscriptions.reads_of(rt.catalog, t.plan.depends_on())
    subscriptions.register(rt, sink, name=t.name, instance=instance, reads=reads_ids, queue=queue)
    done = False
    named = row_type(inlined.desc)
    try:
        while not done:
            batch = await _next_batch(rt, t.name, queue, reads_ids)
            if batch.error is not None:
                message = f"subscribe to {t.name} failed: {batch.error}"
                raise reported(Problem(message, batch.error_sqlstate, batch.error_pg_message))
            done = batch.upper.is_empty() or (
                up_to is not None and not batch.upper.less_equal(up_to - 1)
            )
            upper = None if done else batch.upper.as_option()
            changes = changes_of(batch.updates, inlined.desc, named, upper)
            if changes or progress:
                yield changes
    finally:
        subscriptions.unregister(rt, sink)
        rt.controller.forget_subscribe(sink)
        if not done:
            rt.compute.drop_collections(instance, [sink])


async def _next_batch(
    rt: Runtime, name: str, queue: asyncio.Queue[SubscribeResponse], reads: Iterable[GlobalId]
) -> SubscribeResponse:
    """The subscribe's next batch; :class:`ViewFailed` as soon as a materialized view it reads
    is computed by no replica any more (its upper would never move again)."""
    batch = asyncio.ensure_future(queue.get())
    try:
        return await await_answer(rt, batch, math.inf, reads, what=f"subscribe to {name}")
    finally:
        batch.cancel()  # when the wait is cancelled (the caller's timeout); else a no-op
