"""Dataflow descriptions: what a replica builds, from which inputs, exporting what, from when.

A ``DataflowDescription`` imports persist-backed collections (``source_imports``)
and arrangements of the same replica (``index_imports``), builds ``objects_to_build`` in order,
and exports indexes (arrangements that peeks read) and sinks (materialized views written to a
persist shard, subscribes streamed to the controller).

Time bounds: the dataflow computes its exports correctly at every time ``t`` with
``as_of <= t`` and ``not until <= t``. ``until = {as_of + 1}`` makes a one-time ("batch")
dataflow. The controller always sets ``as_of`` before sending (``MissingAsOf`` otherwise); an
empty ``as_of`` means nothing is ever computed and no ``CreateDataflow`` is sent.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, ShardId
from spate.plan.errors import InvalidDataflow
from spate.plan.relation import Get, RelationExpr
from spate.repr.desc import RelationDesc
from spate.wire import wire


@wire("plan.source_import")
@dataclass(frozen=True, slots=True)
class SourceImport:
    """A persist-backed input.

    ``shard`` is filled in by the controller from storage metadata before the description is
    sent to a replica; ``upper`` is the storage collection's write frontier when last sent.
    """

    id: GlobalId
    desc: RelationDesc
    shard: ShardId | None = None
    upper: Frontier = Antichain.minimum()
    monotonic: bool = False


@wire("plan.index_desc")
@dataclass(frozen=True, slots=True)
class IndexDesc:
    """An arrangement of collection ``on_id`` keyed by the columns at positions ``key``."""

    on_id: GlobalId
    key: tuple[int, ...]


@wire("plan.index_import")
@dataclass(frozen=True, slots=True)
class IndexImport:
    """An arrangement (index ``id``) this replica already maintains, read by this dataflow."""

    id: GlobalId
    index: IndexDesc
    desc: RelationDesc
    monotonic: bool = False


@wire("plan.build_desc")
@dataclass(frozen=True, slots=True)
class BuildDesc:
    """Build collection ``id`` as ``plan``. Later objects may ``Get`` it."""

    id: GlobalId
    plan: RelationExpr


@wire("plan.index_export")
@dataclass(frozen=True, slots=True)
class IndexExport:
    """Export an arrangement ``id`` of ``index.on_id`` (built or imported here)."""

    id: GlobalId
    index: IndexDesc
    desc: RelationDesc


@wire("plan.subscribe_connection")
@dataclass(frozen=True, slots=True)
class SubscribeConnection:
    """Stream the changes of the sinked collection to the controller as subscribe batches."""


@wire("plan.materialized_view_connection")
@dataclass(frozen=True, slots=True)
class MaterializedViewConnection:
    """Write the sinked collection into persist shard ``shard`` (a materialized view).

    ``shard`` is filled in by the controller from the storage collection of the sink's id.
    """

    shard: ShardId | None = None


SinkConnection = SubscribeConnection | MaterializedViewConnection


@wire("plan.sink_export")
@dataclass(frozen=True, slots=True)
class SinkExport:
    """Sink collection ``from_id`` (schema ``from_desc``) as export ``id``.

    ``with_snapshot``: emit the contents at ``as_of`` first (else only later changes);
    ``up_to``: stop once the output frontier reaches it (``{}``: never).
    """

    id: GlobalId
    from_id: GlobalId
    from_desc: RelationDesc
    connection: SubscribeConnection | MaterializedViewConnection
    with_snapshot: bool = True
    up_to: Frontier = Antichain.empty()

    def is_subscribe(self) -> bool:
        return isinstance(self.connection, SubscribeConnection)

    def is_materialized_view(self) -> bool:
        return isinstance(self.connection, MaterializedViewConnection)


@wire("plan.dataflow")
@dataclass(frozen=True, slots=True)
class DataflowDescription:
    """A dataflow to build on every replica of an instance."""

    source_imports: tuple[SourceImport, ...] = ()
    index_imports: tuple[IndexImport, ...] = ()
    objects_to_build: tuple[BuildDesc, ...] = ()
    index_exports: tuple[IndexExport, ...] = ()
    sink_exports: tuple[SinkExport, ...] = ()
    as_of: Frontier | None = None
    until: Frontier = Antichain.empty()
    debug_name: str = ""

    def export_ids(self) -> tuple[GlobalId, ...]:
        """Index exports, then sink exports, in declaration order."""
        return tuple(e.id for e in self.index_exports) + tuple(e.id for e in self.sink_exports)

    def import_ids(self) -> tuple[GlobalId, ...]:
        return tuple(s.id for s in self.source_imports) + tuple(i.id for i in self.index_imports)

    def is_transient(self) -> bool:
        """All exports are transient (``t``-ids): SELECT and SUBSCRIBE dataflows."""
        ids = self.export_ids()
        return bool(ids) and all(i.is_transient() for i in ids)

    def subscribe_ids(self) -> tuple[GlobalId, ...]:
        return tuple(s.id for s in self.sink_exports if s.is_subscribe())

    def persist_sink_ids(self) -> tuple[GlobalId, ...]:
        return tuple(s.id for s in self.sink_exports if s.is_materialized_view())

    def with_as_of(self, as_of: Frontier) -> DataflowDescription:
        return dataclasses.replace(self, as_of=as_of)

    def validate(self) -> None:
        """Raise ``InvalidDataflow`` unless the parts fit together (:func:`validate_dataflow`).

        Checks topological order, unique export ids, that every referenced id is imported or
        built, index keys within arity and matching descs. Constructs nothing, runs nothing.
        """
        validate_dataflow(self)

    def built_ids(self) -> tuple[GlobalId, ...]:
        return tuple(b.id for b in self.objects_to_build)


# --- validation ------------------------------------------------------------------------------
#
# Checks that a ``DataflowDescription`` fits together, before anything is built.
#
# validate_dataflow raises InvalidDataflow naming the ids:
#
# * import ids are unique; no object is both imported and built, or built twice;
# * ``objects_to_build`` is in topological order: every ``Get`` in a plan reads an imported
#   collection (a source import's id or an index import's ``on_id``) or an object built earlier;
# * every ``Get`` agrees with what it reads: same column types, and it may call a column
#   nullable but not call a nullable column non-null (names are not compared: the semantics is
#   positional);
# * export ids are unique and differ from every import id;
# * index exports and sink exports read an imported or built collection, with a matching desc;
#   index keys (of imports and exports) lie within the arity.
#
# Relational plans themselves are validated when they are constructed (types, columns); these
# checks concern only how the parts of the description refer to each other.


def fits(actual: RelationDesc, claimed: RelationDesc) -> str | None:
    """``None`` if a reader may see ``actual`` as ``claimed``; else what differs."""
    if actual.arity != claimed.arity:
        return f"{claimed.arity} columns ({', '.join(claimed.names)}) but it has {actual.arity}"
    for i, (a, c) in enumerate(zip(actual.columns, claimed.columns, strict=True)):
        if a.type != c.type:
            return f"column {i} ({c.name!r}) as {c.type} but it is {a.type}"
        if a.nullable and not c.nullable:
            return f"column {i} ({c.name!r}) as not null but it is nullable"
    return None


def _check_key(key: tuple[int, ...], desc: RelationDesc, what: str) -> None:
    for k in key:
        if not 0 <= k < desc.arity:
            raise InvalidDataflow(
                f"{what}: key column {k} is outside the {desc.arity} columns"
                f" ({', '.join(desc.names)})"
            )


def validate_dataflow(dataflow: DataflowDescription) -> None:
    """Raise ``InvalidDataflow`` unless the description's parts fit (see the module doc)."""
    available: dict[GlobalId, tuple[RelationDesc, str]] = {}
    import_ids: set[GlobalId] = set()
    for s in dataflow.source_imports:
        if s.id in import_ids:
            raise InvalidDataflow(f"source import {s.id} is imported twice")
        import_ids.add(s.id)
        available[s.id] = (s.desc, f"source import {s.id}")
    for ix in dataflow.index_imports:
        if ix.id in import_ids:
            raise InvalidDataflow(f"index import {ix.id} is imported twice")
        import_ids.add(ix.id)
        _check_key(ix.index.key, ix.desc, f"index import {ix.id} on {ix.index.on_id}")
        on = ix.index.on_id
        if on in available:
            problem = fits(available[on][0], ix.desc)
            if problem is not None:
                raise InvalidDataflow(
                    f"index import {ix.id} describes {on} with {problem} in {available[on][1]}"
                )
        else:
            available[on] = (ix.desc, f"index import {ix.id}")

    built: set[GlobalId] = set()
    later = {b.id for b in dataflow.objects_to_build}
    for b in dataflow.objects_to_build:
        if b.id in built:
            raise InvalidDataflow(f"object {b.id} is built twice")
        if b.id in available:
            raise InvalidDataflow(f"object {b.id} is both imported and built")
        for node in b.plan.walk():
            if not isinstance(node, Get):
                continue
            if node.id not in available:
                if node.id in later:
                    raise InvalidDataflow(
                        f"objects_to_build is not in topological order: {b.id} reads "
                        f"{node.id}, which is built after it"
                    )
                raise InvalidDataflow(
                    f"object {b.id} reads {node.id}, which is neither imported nor built"
                )
            desc, where = available[node.id]
            problem = fits(desc, node.desc)
            if problem is not None:
                raise InvalidDataflow(f"object {b.id} reads {node.id} with {problem} (in {where})")
        built.add(b.id)
        available[b.id] = (b.plan.desc, f"object {b.id}")

    exports: set[GlobalId] = set()
    for e in dataflow.index_exports:
        _check_export_id(e.id, exports, import_ids)
        on = e.index.on_id
        if on not in available:
            raise InvalidDataflow(
                f"index export {e.id} is on {on}, which is neither imported nor built"
            )
        problem = fits(available[on][0], e.desc)
        if problem is not None:
            raise InvalidDataflow(f"index export {e.id} describes {on} with {problem}")
        _check_key(e.index.key, e.desc, f"index export {e.id} on {on}")
    for sink in dataflow.sink_exports:
        _check_export_id(sink.id, exports, import_ids)
        if sink.from_id not in available:
            raise InvalidDataflow(
                f"sink export {sink.id} reads {sink.from_id}, which is neither imported nor built"
            )
        problem = fits(available[sink.from_id][0], sink.from_desc)
        if problem is not None:
            raise InvalidDataflow(f"sink export {sink.id} describes {sink.from_id} with {problem}")


def _check_export_id(id: GlobalId, exports: set[GlobalId], import_ids: set[GlobalId]) -> None:
    if id in exports:
        raise InvalidDataflow(f"export id {id} is used twice")
    if id in import_ids:
        raise InvalidDataflow(f"export id {id} is also an import")
    exports.add(id)
