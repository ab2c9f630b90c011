"""Dataflows over test tables: plain indexes and a reduce exported as index, view and subscribe."""

from __future__ import annotations

from collections.abc import Mapping

from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId
from spate.plan.builder import col, count, sum_
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.relation import Get
from spate.repr import INT64, RelationDesc
from spate.repr.types import Row
from spate.testing.reference import Multiset, expected_contents

from .tables import Table, Update

KV = RelationDesc.of(("k", INT64, False), ("v", INT64, False))


def table_index(
    t: Table, index: GlobalId, as_of: int, key: tuple[int, ...] = (0,)
) -> DataflowDescription:
    """An index over table ``t`` itself."""
    return DataflowDescription(
        source_imports=(SourceImport(t.id, t.desc, shard=t.shard),),
        index_exports=(IndexExport(index, IndexDesc(t.id, key), t.desc),),
        as_of=Antichain.of(as_of),
        debug_name=f"index {index} on {t.id}",
    )


def totals(
    t: Table,
    view: GlobalId,
    as_of: int,
    *,
    index: GlobalId | None = None,
    mv_shard: ShardId | None = None,
    mv: GlobalId | None = None,
    subscribe: GlobalId | None = None,
) -> DataflowDescription:
    """Per key: count and sum of ``v`` — exported as an index, a view and/or a subscribe."""
    plan = Get(t.id, t.desc).reduce(["k"], n=count(), total=sum_(col("v")))
    desc = plan.desc
    sinks: list[SinkExport] = []
    if mv is not None:
        sinks.append(SinkExport(mv, view, desc, MaterializedViewConnection(mv_shard)))
    if subscribe is not None:
        sinks.append(SinkExport(subscribe, view, desc, SubscribeConnection()))
    return DataflowDescription(
        source_imports=(SourceImport(t.id, t.desc, shard=t.shard),),
        objects_to_build=(BuildDesc(view, plan),),
        index_exports=(IndexExport(index, IndexDesc(view, (0,)), desc),) if index else (),
        sink_exports=tuple(sinks),
        as_of=Antichain.of(as_of),
        debug_name=f"totals {view}",
    )


def over_index(
    imported: GlobalId, on: GlobalId, desc: RelationDesc, index: GlobalId, as_of: int
) -> DataflowDescription:
    """An index of the rows of index ``imported`` (on collection ``on``) with ``n > 1``."""
    built = GlobalId.user(50_000 + index.value)
    plan = Get(on, desc).filter(col("n") > 1)
    return DataflowDescription(
        index_imports=(IndexImport(imported, IndexDesc(on, (0,)), desc),),
        objects_to_build=(BuildDesc(built, plan),),
        index_exports=(IndexExport(index, IndexDesc(built, (0,)), desc),),
        as_of=Antichain.of(as_of),
        debug_name=f"filter of {imported}",
    )


def oracle(
    dataflow: DataflowDescription,
    inputs: Mapping[GlobalId, Table | list[Update]],
    *,
    upper: int,
) -> dict[GlobalId, dict[int, Multiset]]:
    """Every export's expected contents at every time in ``[as_of, upper)``; ``inputs`` are
    tables or update lists by collection id."""
    streams = {i: (t.updates if isinstance(t, Table) else t) for i, t in inputs.items()}
    return expected_contents(dataflow, streams, upper=upper)


def as_rows(contents: Multiset) -> list[tuple[Row, int]]:
    return sorted(((r, n) for r, n in contents.items() if n), key=repr)
