"""The read plan: how one read (a SELECT, :meth:`Environment.select`) is answered.

A read's route is chosen once, by :func:`plan_read`, from the catalog alone (no I/O), and is
one of a closed set of cases, cheapest first (Materialize calls this the peek plan):

* :class:`Constant` — the plan reads no collection (``SELECT 1``, ``VALUES …``): evaluated here.
* :class:`Introspection` — the plan reads only ``spate_catalog`` relations: evaluated here from
  their shards (no replica needed).
* :class:`FastPathLookup` — ``Map``/``Filter``/``Project`` over an indexed object whose filters
  fix the index key to literals: a peek of those keys of an existing index (no dataflow, no
  Spark job), the rest of the plan applied to the rows found (:mod:`spate.environment.lookup`).
* :class:`FastPathScan` — an indexed object, maybe under ``Map``/``Filter``/``Project``: a peek
  of the whole index, the rest of the plan applied here.
  An index that has not hydrated on any replica yet (after a reopen) is not used when what it
  indexes is a storage collection: that is read from persist instead (the warm start: a
  ``serializable`` read is answered at once from the persisted contents).
* :class:`PersistRead` — a storage collection (table, subsource, materialized view, a
  ``spate_catalog`` relation), maybe under ``Map``/``Filter``/``Project``: its snapshot read
  from persist, in this process when it holds at most ``small_read_updates`` updates (or no
  cluster has replicas), else by a replica of ``cluster``; the rest of the plan applied here.
* :class:`InProcess` — anything else over storage collections (a join, an aggregate, a
  subquery): the inputs' snapshots read and the plan evaluated here when they are small
  (:mod:`spate.environment.small_reads`), else as :class:`OneOffDataflow`. Here, in both this
  and :class:`PersistRead`, a plan :mod:`spate.plan.evaluation.vectorized` covers is
  evaluated column at a time over the snapshots as Arrow tables (``EXPLAIN`` says so).
* :class:`OneOffDataflow` — a dataflow built on ``cluster`` at the read's timestamp, peeked
  once and dropped.

``small_reads=False`` leaves to a dataflow every read that is not a constant, introspection,
an index peek or a plain read of one collection. The executor is
:func:`spate.environment.reads.execute_read`; ``EXPLAIN`` shows :func:`explain_lines`.
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.environment import introspection, lookup, small_reads
from spate.environment.builtins import IntrospectionItem as IntrospectionItem
from spate.environment.catalog import (
    IndexItem,
    MaterializedViewItem,
    SubsourceItem,
    TableItem,
)
from spate.environment.planning import inline_views
from spate.environment.runtime import Runtime
from spate.environment.small_reads import VECTORISED_FACTOR
from spate.errors import CollectionMissing, InstanceMissing
from spate.plan.relation import Filter, Get, Map, Project, RelationExpr
from spate.repr.types import Datum, Row

StorageItem = TableItem | SubsourceItem | MaterializedViewItem | IntrospectionItem
"""What a :class:`PersistRead` reads: a collection with a persist shard."""
_STORED = (TableItem, SubsourceItem, MaterializedViewItem)


@dataclass(frozen=True, slots=True)
class Constant:
    """``plan`` reads no collection; evaluated here at the read's timestamp."""

    plan: RelationExpr


@dataclass(frozen=True, slots=True)
class Introspection:
    """``plan`` (views inlined) reads only ``spate_catalog`` relations; evaluated here."""

    plan: RelationExpr


@dataclass(frozen=True, slots=True)
class FastPathLookup:
    """Peek ``index`` (on ``base``) for the key tuples ``constraints`` (none: no row can
    match, nothing is peeked), then evaluate ``plan`` over the rows found.

    When ``base`` is a storage collection (``here_up_to > 0``) whose snapshot holds at most
    ``here_up_to`` updates, the rows with those keys are taken from its persisted contents
    here instead (cached and hashed by ``only``'s column: no replica round trip)."""

    plan: RelationExpr
    index: IndexItem
    base: Get
    constraints: tuple[Row, ...]
    here_up_to: int = 0
    only: tuple[int, tuple[Datum, ...]] | None = None


@dataclass(frozen=True, slots=True)
class FastPathScan:
    """Peek the whole of ``index`` (on ``base``); when ``plan`` is not ``base`` itself,
    evaluate it over the rows read."""

    plan: RelationExpr
    index: IndexItem
    base: Get


@dataclass(frozen=True, slots=True)
class PersistRead:
    """Read the snapshot of ``item`` (``base``) from persist — here when it is small (at
    most ``here_up_to`` updates) or ``cluster`` is ``None``, else by a replica of
    ``cluster`` — then evaluate ``plan`` over it when ``plan`` is not ``base`` itself."""

    plan: RelationExpr
    item: StorageItem
    base: Get
    cluster: str | None
    here_up_to: int
    only: tuple[int, tuple[Datum, ...]] | None = None
    """A column ``plan``'s filters fix, and its values: read here, only those rows are
    evaluated (through a hash index of the cached contents)."""

    @property
    def may_read_here(self) -> bool:
        """Whether the snapshot may be read here: no cluster, or one small enough (else a
        replica of ``cluster`` reads it)."""
        return self.cluster is None or self.here_up_to > 0


@dataclass(frozen=True, slots=True)
class InProcess:
    """Read the snapshots of ``plan``'s inputs (views inlined) and evaluate it here when they
    hold at most ``up_to`` updates together; else run ``otherwise``."""

    plan: RelationExpr
    up_to: int
    otherwise: OneOffDataflow


@dataclass(frozen=True, slots=True)
class OneOffDataflow:
    """Build ``plan`` (views inlined) as a dataflow on ``cluster`` (``None``: the default one,
    created if there is none) at the read's timestamp, peek it once, drop it."""

    plan: RelationExpr
    cluster: str | None


ReadPlan = (
    Constant
    | Introspection
    | FastPathLookup
    | FastPathScan
    | PersistRead
    | InProcess
    | OneOffDataflow
)
"""How one read is answered (module docs)."""


def plan_read(
    rt: Runtime, plan: RelationExpr, cluster: str | None, *, small_reads: bool = True
) -> ReadPlan:
    """The route of a read of ``plan`` on ``cluster`` (``None``: any), from the catalog as it
    is now. Pure: reads nothing but the catalog and the settings."""
    if not plan.depends_on():
        return Constant(plan)
    inlined = inline_views(plan, rt.catalog)
    if introspection.reads_only_system(inlined):
        return Introspection(inlined)
    found = lookup.index_lookup(rt, plan, cluster)
    if found is not None and not _rehydrating(rt, found.index):
        stored = isinstance(rt.catalog.find_id(found.base.id), _STORED)
        here = rt.settings.small_read_updates if small_reads and stored else 0
        only = lookup.fixed_column(plan) if here else None
        return FastPathLookup(plan, found.index, found.base, found.constraints, here, only)
    base = _linear_base(plan)
    if base is not None and (small_reads or base is plan or found is not None):
        index = _index_on(rt, base, cluster)
        if index is not None and not _rehydrating(rt, index):
            return FastPathScan(plan, index, base)
        item = rt.catalog.by_id(base.id)
        if isinstance(item, (TableItem, SubsourceItem, MaterializedViewItem, IntrospectionItem)):
            replicas = cluster is not None or any(c.replicas for c in rt.catalog.clusters)
            limit = rt.settings.small_read_updates if small_reads else 0
            via = rt.default_cluster(cluster) if replicas else None
            only = lookup.fixed_column(plan) if plan is not base else None
            return PersistRead(plan, item, base, via, limit, only)
    dataflow = OneOffDataflow(inlined, cluster)
    none = cluster is None and not rt.catalog.clusters  # read here before creating one
    limit = rt.settings.small_read_updates
    if (
        small_reads
        and limit > 0
        and (none or rt.catalog.cluster(rt.default_cluster(cluster)).replicas)
    ):
        return InProcess(inlined, limit, dataflow)
    return dataflow


def _rehydrating(rt: Runtime, index: IndexItem) -> bool:
    """Whether ``index`` has not hydrated on any replica yet while what it indexes is a
    storage collection: persist has its contents (the warm start after a reopen), so a read
    need not wait for the replicas to rebuild the index."""
    if not isinstance(
        rt.catalog.find_id(index.on), (TableItem, SubsourceItem, MaterializedViewItem)
    ):
        return False
    try:
        return not rt.compute.collection_hydrated(rt.instance_of(index.cluster), index.id)
    except (CollectionMissing, InstanceMissing):  # not known to the controller: use the index
        return False


def _linear_base(plan: RelationExpr) -> Get | None:
    """The ``Get`` under a chain of ``Map``/``Filter``/``Project`` (no temporal filter)."""
    node = plan
    while isinstance(node, (Map, Filter, Project)):
        if isinstance(node, Filter) and node.is_temporal():
            return None
        node = node.input
    return node if isinstance(node, Get) else None


def _index_on(rt: Runtime, base: Get, cluster: str | None) -> IndexItem | None:
    """An index of ``base`` on ``cluster`` (any, when ``None``) that has replicas."""
    return next(
        (
            i
            for i in rt.catalog
            if isinstance(i, IndexItem)
            and i.on == base.id
            and (cluster is None or i.cluster == cluster)
            and rt.catalog.cluster(i.cluster).replicas
        ),
        None,
    )


def kind(read: ReadPlan) -> str:
    """A short name of the route (``"fast path lookup"``…), for metrics and tests."""
    return _KINDS[type(read)]


_KINDS: dict[type, str] = {
    Constant: "constant",
    Introspection: "introspection",
    FastPathLookup: "fast path lookup",
    FastPathScan: "fast path scan",
    PersistRead: "persist read",
    InProcess: "in process",
    OneOffDataflow: "one-off dataflow",
}


def explain_lines(rt: Runtime, read: ReadPlan) -> list[str]:
    """What ``EXPLAIN`` says of the route (Materialize's "fast path" wording for index peeks)."""

    def name(id: object) -> str:
        item = rt.catalog.find_id(id)  # type: ignore[arg-type]
        return str(id) if item is None else item.name

    def then(plan: RelationExpr, base: Get) -> list[str]:
        return (
            [] if plan is base else ["  then Map/Filter/Project evaluated here over the rows read"]
        )

    match read:
        case Constant():
            return ["Read plan: constant (evaluated here, no dataflow)"]
        case Introspection():
            return ["Read plan: introspection (spate_catalog relations read here, no dataflow)"]
        case FastPathLookup(plan=plan, index=index, base=base, constraints=keys):
            shown = ", ".join(_row(k) for k in keys[:8]) + (", …" if len(keys) > 8 else "")
            here = (
                [f"  from the persisted contents here when they hold at most {n} updates"]
                if (n := read.here_up_to)
                else []
            )
            return [
                f"Read plan: fast path: lookup of index {index.name} on {name(base.id)} "
                f"(cluster {index.cluster}), key values {shown or 'none (no row can match)'}",
                *here,
                *then(plan, base),
            ]
        case FastPathScan(plan=plan, index=index, base=base):
            return [
                f"Read plan: fast path: scan of index {index.name} on {name(base.id)} "
                f"(cluster {index.cluster})",
                *then(plan, base),
            ]
        case PersistRead(plan=plan, item=item, base=base, cluster=cluster, here_up_to=n):
            where = (
                "here"
                if cluster is None
                else f"here up to {n} updates, else by a replica of cluster {cluster}"
            )
            columnar = _columnar(plan) if read.only is None and plan is not base else []
            return [
                f"Read plan: persist read of {item.name} ({where})",
                *then(plan, base),
                *columnar,
            ]
        case InProcess(plan=plan, up_to=n, otherwise=df):
            inputs = ", ".join(sorted(name(i) for i in plan.depends_on()))
            return [
                f"Read plan: in process over the snapshots of {inputs} (up to {n} updates), "
                f"else a one-off dataflow on cluster {df.cluster or 'default'}",
                *_columnar(plan),
            ]
        case OneOffDataflow(cluster=cluster):
            return [f"Read plan: one-off dataflow on cluster {cluster or 'default'}"]


def _columnar(plan: RelationExpr) -> list[str]:
    """The line saying a plan evaluated here is evaluated column at a time, if it is."""
    if small_reads.vectorised(plan) is None:
        return []
    return [f"  column at a time over Arrow snapshots (up to {VECTORISED_FACTOR}x the updates)"]


def _row(key: Row) -> str:
    return "(" + ", ".join("NULL" if v is None else repr(v) for v in key) + ")"
