"""The rows of the ``spate_catalog`` relations, from what the environment's parts know.

:func:`install` creates the relations' collections at open (or adopts them: their ids are
fixed) and hands the storage controller :func:`desired_rows` as its introspection provider:
before each write of the managed collections (every maintenance interval, and on
:func:`refresh`) it states their whole desired contents, and the collection manager appends
the difference at its write time. :func:`read` reads one relation at its latest complete time.

Everything here runs on the environment's event loop (the provider is called there) and only
reads the parts' state: introspection never changes what it describes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Final

from spate.compute.controller.introspection import ReplicaFrontiers
from spate.environment import subscriptions
from spate.environment.builtins import BUILTINS, IntrospectionItem, builtin_by_id, builtin_of
from spate.environment.catalog import (
    IndexItem,
    Item,
    MaterializedViewItem,
    SinkItem,
    SourceItem,
    SubsourceItem,
    TableItem,
    item_desc,
    kind_of,
)
from spate.environment.clusters import service_name
from spate.environment.runtime import Runtime
from spate.errors import ReadTimeout, SpateError
from spate.frontier.antichain import Antichain, Frontier
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId
from spate.orchestrator.service import ServiceMissing
from spate.plan.evaluation.relation import Multiset, evaluate
from spate.plan.relation import RelationExpr
from spate.protocol.storage import ObjectStatus, StatusUpdate
from spate.repr.types import Row
from spate.storage.controller.types import (
    CollectionDescription,
    IntrospectionKind,
    IntrospectionSource,
)

_K: Final = IntrospectionKind
_log: Final = logging.getLogger("spate.environment.introspection")
Rows = dict[IntrospectionKind, list[Row]]


async def install(rt: Runtime) -> None:
    """Create (or adopt) the relations' collections and start writing them."""
    await rt.storage.create_collections(
        [(b.id, CollectionDescription(b.desc, IntrospectionSource(b.kind))) for b in BUILTINS]
    )
    rt.storage.set_read_policy(
        [
            (b.id, ReadPolicy.lag_writes_by(b.retain_history_ms, b.retain_history_ms))
            for b in BUILTINS
        ]
    )
    rt.storage.set_introspection_provider(lambda: desired_rows(rt))


async def refresh(rt: Runtime) -> None:
    """Write every relation now, so that :func:`read` sees the present."""
    await rt.storage.write_introspection()


def reads_only_system(plan: RelationExpr) -> bool:
    """``plan`` (views inlined) reads ``spate_catalog`` relations and nothing else."""
    ids = plan.depends_on()
    return bool(ids) and all(builtin_by_id(i) is not None for i in ids)


async def evaluate_here(rt: Runtime, plan: RelationExpr, ts: int, timeout: float) -> Multiset:
    """``plan`` over ``spate_catalog`` relations only, at ``ts``, evaluated in this process
    from their shards: introspection needs no replica (it is read while replicas are down)."""
    ids = sorted(plan.depends_on())
    holds = rt.storage.acquire_read_holds(ids)
    try:
        for hold in holds:
            hold.try_downgrade(Antichain.of(ts))
        try:
            await rt.controller.wait_for_uppers(ids, ts, timeout)
        except TimeoutError as e:
            raise ReadTimeout(f"read of spate_catalog at {ts}: {e}") from None
        inputs = {id: Counter(dict(await rt.storage.snapshot(id, ts))) for id in ids}
    finally:
        for hold in holds:
            hold.release()
    return evaluate(plan, inputs, ts)


async def read(rt: Runtime, kind: IntrospectionKind) -> list[Row]:
    """The rows of the relation of ``kind`` at its latest complete time (each row repeated
    by its multiplicity)."""
    item = builtin_of(kind)
    upper = rt.storage.collection_frontiers(item.id).upper.as_option()
    if upper is None or upper == 0:
        return []
    rows = await rt.storage.snapshot(item.id, upper - 1)
    return [r for r, n in rows for _ in range(n)]


def _t(f: Frontier) -> int | None:
    return f.as_option()


def _cluster_of(item: Item) -> str | None:
    return item.cluster if isinstance(item, (MaterializedViewItem, IndexItem)) else None


def _items(rt: Runtime) -> list[Item]:
    return [*rt.catalog, *BUILTINS]


def desired_rows(rt: Runtime) -> Rows:
    """The whole desired contents of every relation written by the environment."""
    now = rt.clock.now_millis()
    out: Rows = {
        _K.OBJECTS: [],
        _K.COLUMNS: [],
        _K.CLUSTERS: [],
        _K.REPLICAS: [],
        _K.COLLECTION_FRONTIERS: [],
        _K.HYDRATION: [],
        _K.DATAFLOW_STATISTICS: [],
        _K.SOURCE_SUMMARY: [],
        _K.SINK_SUMMARY: [],
        _K.PEEKS: [],
        _K.SUBSCRIBES: [],
        _K.ERRORS: [],
        _K.PIPELINE_EXPECTATIONS: [
            row for rows in list(rt.pipeline_expectations.values()) for row in rows
        ],
    }
    for item in _items(rt):
        out[_K.OBJECTS].append((str(item.id), item.name, kind_of(item), _cluster_of(item)))
        desc = None if isinstance(item, IndexItem) else item_desc(item)
        if desc is not None:
            for pos, col in enumerate(desc.columns, start=1):
                out[_K.COLUMNS].append((str(item.id), col.name, pos, str(col.type), col.nullable))
        try:
            frontiers = _frontiers(rt, item, now)
        except SpateError:  # dropped meanwhile (its catalog row goes at the next write)
            _log.debug("no frontiers for %s", item.name, exc_info=True)
            frontiers = None
        if frontiers is not None:
            out[_K.COLLECTION_FRONTIERS].append(frontiers)
    out[_K.HYDRATION], out[_K.DATAFLOW_STATISTICS], out[_K.ERRORS] = _dataflows(rt)
    out[_K.CLUSTERS], out[_K.REPLICAS] = _clusters(rt)
    out[_K.SOURCE_SUMMARY], out[_K.SINK_SUMMARY] = _sources_and_sinks(rt)
    out[_K.PEEKS], out[_K.SUBSCRIBES] = _reads(rt)
    return out


def _frontiers(rt: Runtime, item: Item, now: int) -> Row | None:
    since: int | None
    upper: int | None
    if isinstance(
        item, (TableItem, SourceItem, SubsourceItem, MaterializedViewItem, IntrospectionItem)
    ):
        f = rt.storage.collection_frontiers(item.id)
        since, upper = _t(f.since), _t(f.upper)
    elif isinstance(item, IndexItem):
        cf = rt.compute.collection_frontiers(item.id, rt.instance_of(item.cluster))
        since, upper = _t(cf.read_frontier), _t(cf.write_frontier)
    elif isinstance(item, SinkItem):
        since = upper = None
    else:
        return None
    lag = None if upper is None else max(0, now - upper)
    return (str(item.id), item.name, kind_of(item), _cluster_of(item), since, upper, lag)


def _dataflows(rt: Runtime) -> tuple[list[Row], list[Row], list[Row]]:
    """Rows of ``hydration``, ``dataflow_statistics`` and ``errors`` (a view or index whose
    error collection a replica last reported not empty at its latest time)."""
    hydration: list[Row] = []
    stats: list[Row] = []
    errors: list[Row] = []
    for cluster in rt.catalog.clusters:
        on = rt.catalog.objects_on(cluster.name)
        for r in cluster.replicas:
            try:
                reported = rt.compute.replica_frontiers(cluster.instance, r.id)
            except Exception:
                reported = {}
            for item in on:
                rf = reported.get(item.id)
                hydrated = rf is not None and rf.hydrated
                row = (str(item.id), item.name, cluster.name, r.name, str(r.id), hydrated)
                hydration.append(row)
                stats.append((str(item.id), item.name, cluster.name, r.name, *_step_stats(rf)))
                if rf is not None and rf.eval_error is not None:
                    errors.append((str(item.id), item.name, cluster.name, r.name, rf.eval_error))
    return hydration, stats, errors


def _step_stats(rf: ReplicaFrontiers | None) -> tuple[int | None, ...]:
    """steps, spark_jobs, step_time_ms, rows_in, rows_out: as the replica last reported them;
    before its first report, the steps the controller counted and NULLs."""
    if rf is None:
        return (0, None, None, None, None)
    s = rf.statistics
    if s is None:
        return (rf.steps, None, None, None, None)
    return (s.steps, s.spark_jobs, s.step_time_ms, s.rows_in, s.rows_out)


def _clusters(rt: Runtime) -> tuple[list[Row], list[Row]]:
    clusters: list[Row] = []
    replicas: list[Row] = []
    for cluster in rt.catalog.clusters:
        clusters.append((str(cluster.instance), cluster.name, len(cluster.replicas)))
        for r in cluster.replicas:
            service = service_name(cluster.name, r.name)
            try:
                process = str(rt.orchestrator.status(service))
                restarts = rt.orchestrator.restarts(service)
                placed = rt.orchestrator.placed(service)
                if placed is not None:
                    process = f"at {placed}"
            except (ServiceMissing, KeyError):
                process, restarts = "missing", 0
            try:
                info = rt.compute.replica_info(cluster.instance, r.id)
                health, failures, error = info.health, info.failures, info.last_error
                hydrated, collections = info.hydrated_collections, info.collections
            except Exception:
                health, failures, error, hydrated, collections = "missing", 0, None, 0, 0
            replicas.append(
                (
                    str(r.id),
                    r.name,
                    cluster.name,
                    process,
                    health,
                    restarts,
                    failures,
                    hydrated,
                    collections,
                    error,
                )
            )
    return clusters, replicas


def _sum(values: Iterable[int]) -> int:
    return sum(values)


def _sources_and_sinks(rt: Runtime) -> tuple[list[Row], list[Row]]:
    sources: list[Row] = []
    sinks: list[Row] = []
    stats = rt.storage.statistics
    ceased = _ceased_subsources(rt)
    for item in rt.catalog:
        if isinstance(item, (SourceItem, SubsourceItem)):
            ingestion = item.id if isinstance(item, SourceItem) else item.source
            last = rt.storage.status(ingestion)
            status = None if last is None else last.status.value
            error = None if last is None else last.error
            errors = rt.storage.error_count(ingestion)
            own = ceased.get(item.id)
            if own is not None and status != ObjectStatus.DROPPED.value:
                # A subsource that stopped on its own says so; its source goes on.
                status, error = own[1].status.value, own[1].error
                errors = rt.storage.error_count(item.id)
            elif isinstance(item, SourceItem) and error is None:
                # The source row summarises: the latest of its subsources that ceased.
                latest = max(
                    (
                        (u.timestamp_ms, sub.name, u.error or "")
                        for sub, u in ceased.values()
                        if sub.source == item.id
                    ),
                    default=None,
                )
                if latest is not None:
                    error = f"subsource {latest[1]} ceased: {latest[2]}"
            mine = stats.source(item.id)
            upper = rt.storage.collection_frontiers(item.id).upper.as_option()
            sources.append(
                (
                    str(item.id),
                    item.name,
                    status,
                    _sum(s.updates_committed for s in mine),
                    _sum(s.bytes_received for s in mine),
                    errors,
                    error,
                    None if upper is None else upper - 1,
                )
            )
        elif isinstance(item, TableItem) and item.webhook:
            # Written by the environment's endpoint, not ingested: the endpoint's counts.
            hooks = rt.webhooks.of(item.id)
            upper = rt.storage.collection_frontiers(item.id).upper.as_option()
            sources.append(
                (
                    str(item.id),
                    item.name,
                    ObjectStatus.RUNNING.value,
                    hooks.accepted,
                    hooks.bytes_accepted,
                    hooks.rejected,
                    hooks.last_error,
                    None if upper is None else upper - 1,
                )
            )
        elif isinstance(item, SinkItem):
            last = rt.storage.status(item.id)
            out = stats.sink(item.id)
            try:
                written = rt.storage.export(item.id).write_frontier.as_option()
            except Exception:
                written = None
            sinks.append(
                (
                    str(item.id),
                    item.name,
                    None if last is None else last.status.value,
                    _sum(s.messages_committed for s in out),
                    _sum(s.bytes_committed for s in out),
                    rt.storage.error_count(item.id),
                    None if last is None else last.error,
                    None if written is None else written - 1,
                )
            )
    return sources, sinks


def _ceased_subsources(rt: Runtime) -> dict[GlobalId, tuple[SubsourceItem, StatusUpdate]]:
    """The subsources whose own status is ``ceased`` (a MySQL table changed upstream), with
    that status."""
    out: dict[GlobalId, tuple[SubsourceItem, StatusUpdate]] = {}
    for item in rt.catalog:
        if isinstance(item, SubsourceItem):
            own = rt.storage.status(item.id)
            if own is not None and own.status is ObjectStatus.CEASED:
                out[item.id] = (item, own)
    return out


def _reads(rt: Runtime) -> tuple[list[Row], list[Row]]:
    peeks: list[Row] = []
    subs: list[Row] = []
    names = subscriptions.names(rt)
    for cluster in rt.catalog.clusters:
        if cluster.instance not in rt.compute.instance_ids():
            continue
        pending = rt.compute.peeks(cluster.instance)
        running = rt.compute.subscribes(cluster.instance)
        for p in pending:
            target = rt.catalog.find_id(p.target)
            peeks.append(
                (
                    str(p.uuid),
                    cluster.name,
                    str(p.target) if target is None else target.name,
                    p.timestamp,
                    None if p.replica is None else str(p.replica),
                    p.requested_at_ms,
                )
            )
        for id, upper in sorted(running.items()):
            subs.append((str(id), names.get(id, str(id)), cluster.name, upper.as_option()))
    return peeks, subs
