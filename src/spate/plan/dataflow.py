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
from spate.plan.relation import RelationExpr
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
        """Raise ``InvalidDataflow`` unless the parts fit together (:mod:`spate.plan.validate`).

        Checks topological order, unique export ids, that every referenced id is imported or
        built, index keys within arity and matching descs. Constructs nothing, runs nothing.
        """
        from spate.plan.validate import validate_dataflow

        validate_dataflow(self)

    def built_ids(self) -> tuple[GlobalId, ...]:
        return tuple(b.id for b in self.objects_to_build)
