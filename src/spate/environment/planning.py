"""From catalog objects to dataflow descriptions.

* **Views are inlined**: a ``Get`` of a view becomes the view's plan, recursively, so that a
  dataflow only ever reads storage collections (tables, subsources, materialized views).
* **as_of selection**: a new dataflow starts at the latest time at which all its inputs are
  readable and complete — ``max(max(sinces), min(uppers) - 1)`` — so hydration reads one
  snapshot and the dataflow is immediately close to its inputs. A materialized view that
  already has data resumes at ``max(max(sinces), upper(view) - 1)``: its replicas write only
  from the view's upper on, and the dataflow is correct at every time from its as_of. Its
  inputs' sinces may be beyond the view's upper (after a crash of every process, read policies
  move them before the view's dataflow holds them): its first write is then a correction of the
  shard at the as_of (:mod:`spate.compute.replica.sinks`), never a second copy of the view.
* Descriptions: a materialized view builds its plan under its own id and sinks it to its
  shard; an index builds (or imports) the indexed collection and exports an arrangement;
  a one-off SELECT builds the plan with ``until = as_of + 1`` and exports an arrangement that
  is peeked once; a SUBSCRIBE sinks the plan to the controller.
"""

from __future__ import annotations

from collections.abc import Sequence

from spate.environment.catalog import (
    CatalogState,
    IndexItem,
    MaterializedViewItem,
    UnknownName,
    ViewItem,
    item_desc,
)
from spate.errors import NotReadable as NotReadable
from spate.errors import UsageError
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.relation import Get, RelationExpr
from spate.plan.rewrite import replace_gets
from spate.repr.desc import RelationDesc


def inline_views(plan: RelationExpr, catalog: CatalogState) -> RelationExpr:
    """``plan`` with every view replaced by its (inlined) definition."""

    def inline(get: Get) -> RelationExpr:
        try:
            item = catalog.by_id(get.id)
        except UnknownName:
            return get
        if isinstance(item, ViewItem):
            return inline_views(item.plan, catalog)
        return get

    return replace_gets(plan, inline)


def storage_inputs(plan: RelationExpr) -> list[GlobalId]:
    """The collections an inlined plan reads, in id order."""
    return sorted(plan.depends_on())


def source_imports(ids: Sequence[GlobalId], catalog: CatalogState) -> tuple[SourceImport, ...]:
    """Source imports for storage collections ``ids`` (the controller fills shard and upper)."""
    out = []
    for id in ids:
        desc = item_desc(catalog.by_id(id))
        assert desc is not None, f"{id} is not a readable collection"
        out.append(SourceImport(id, desc))
    return tuple(out)


def choose_as_of(
    sinces: Sequence[Frontier], uppers: Sequence[Frontier], *, at_least: int = 0
) -> int:
    """The latest time at which all inputs are readable and complete (see module docs)."""
    since = at_least
    for s in sinces:
        t = s.as_option()
        if t is None:
            raise NotReadable("an input has been compacted away entirely (its since is {})")
        since = max(since, t)
    complete: int | None = None
    for u in uppers:
        t = u.as_option()
        if t is not None:
            complete = t - 1 if complete is None else min(complete, t - 1)
    if complete is None:
        return since
    return max(since, complete)


MV_BUILD_OFFSET = 1 << 48
"""Transient ids from here up name the collections materialized views compute."""


def materialized_view_dataflow(
    item: MaterializedViewItem, plan: RelationExpr, catalog: CatalogState, as_of: int
) -> DataflowDescription:
    ids = storage_inputs(plan)
    # The computed collection gets its own (transient) id: the view's id names the sink export.
    built = GlobalId.transient(MV_BUILD_OFFSET + item.id.value)
    return DataflowDescription(
        source_imports=source_imports(ids, catalog),
        objects_to_build=(BuildDesc(built, plan),),
        sink_exports=(SinkExport(item.id, built, plan.desc, MaterializedViewConnection()),),
        as_of=Antichain.of(as_of),
        debug_name=f"materialized view {item.name}",
    )


def index_dataflow(
    item: IndexItem, catalog: CatalogState, as_of: int
) -> tuple[DataflowDescription, RelationDesc]:
    """An index: import the collection it is on (or build the view it is on) and arrange it."""
    on = catalog.by_id(item.on)
    if isinstance(on, ViewItem):
        plan = inline_views(on.plan, catalog)
        ids = storage_inputs(plan)
        builds: tuple[BuildDesc, ...] = (BuildDesc(on.id, plan),)
        desc = plan.desc
    else:
        desc_or_none = item_desc(on)
        if desc_or_none is None:
            raise UsageError(f"cannot index {on.name}: it is not a readable collection")
        desc = desc_or_none
        ids = [on.id]
        builds = ()
    df = DataflowDescription(
        source_imports=source_imports(ids, catalog),
        objects_to_build=builds,
        index_exports=(IndexExport(item.id, IndexDesc(item.on, item.key), desc),),
        as_of=Antichain.of(as_of),
        debug_name=f"index {item.name}",
    )
    return df, desc


def select_dataflow(
    plan: RelationExpr,
    catalog: CatalogState,
    as_of: int,
    *,
    build_id: GlobalId,
    index_id: GlobalId,
) -> DataflowDescription:
    """A one-time dataflow computing ``plan`` at ``as_of`` into an arrangement to peek."""
    ids = storage_inputs(plan)
    key = tuple(range(plan.desc.arity))
    return DataflowDescription(
        source_imports=source_imports(ids, catalog),
        objects_to_build=(BuildDesc(build_id, plan),),
        index_exports=(IndexExport(index_id, IndexDesc(build_id, key), plan.desc),),
        as_of=Antichain.of(as_of),
        until=Antichain.of(as_of + 1),
        debug_name="select",
    )


def subscribe_dataflow(
    plan: RelationExpr,
    catalog: CatalogState,
    as_of: int,
    *,
    build_id: GlobalId,
    sink_id: GlobalId,
    up_to: int | None,
    with_snapshot: bool = True,
) -> DataflowDescription:
    ids = storage_inputs(plan)
    return DataflowDescription(
        source_imports=source_imports(ids, catalog),
        objects_to_build=(BuildDesc(build_id, plan),),
        sink_exports=(
            SinkExport(
                sink_id,
                build_id,
                plan.desc,
                SubscribeConnection(),
                with_snapshot=with_snapshot,
                up_to=Antichain.empty() if up_to is None else Antichain.of(up_to),
            ),
        ),
        as_of=Antichain.of(as_of),
        debug_name="subscribe",
    )


def restore_order(catalog: CatalogState) -> list[MaterializedViewItem | IndexItem]:
    """Materialized views and indexes in an order where dependencies come first (by id)."""
    items = [i for i in catalog if isinstance(i, (MaterializedViewItem, IndexItem))]
    return sorted(items, key=lambda i: i.id)
