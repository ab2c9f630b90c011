"""The row estimate a replica refuses too-large one-off reads by: products of cross-joined
inputs, equi-joined inputs counted as their largest, intermediate collections included."""

from __future__ import annotations

from spate.compute.replica.cardinality import estimate_rows, is_one_off
from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.dataflow import BuildDesc, DataflowDescription, IndexDesc, IndexExport, SourceImport
from spate.plan.expr import Literal
from spate.plan.relation import Filter, Get, Join, Reduce, RelationExpr, TopK, Union
from spate.repr import BOOL, INT64, RelationDesc

D = RelationDesc.of(("a", INT64, False))
T, U = GlobalId.user(1), GlobalId.user(2)
ONE_OFF = GlobalId.transient(1)


def _desc(plan: RelationExpr, export: GlobalId = ONE_OFF) -> DataflowDescription:
    built = GlobalId.transient(100)
    return DataflowDescription(
        source_imports=(SourceImport(T, D), SourceImport(U, D)),
        objects_to_build=(BuildDesc(built, plan),),
        index_exports=(IndexExport(export, IndexDesc(built, ()), plan.desc),),
        as_of=Antichain.of(0),
    )


def _cross(n: int) -> Join:
    return Join(tuple(Get(T, D) for _ in range(n)))


def test_a_cross_join_is_the_product_of_its_inputs() -> None:
    assert estimate_rows(_desc(_cross(12)), {T: 10}) == 10**12
    assert estimate_rows(_desc(Filter(_cross(3), (Literal(True, BOOL),))), {T: 10}) == 1000


def test_an_aggregate_of_a_cross_join_counts_the_join() -> None:
    count = AggregateExpr(AggregateFunc.COUNT, Literal(True, BOOL))
    plan = Reduce(_cross(7), (), (count,))
    assert estimate_rows(_desc(plan), {T: 10}) == 10**7


def test_equi_joined_inputs_count_as_their_largest_and_groups_multiply() -> None:
    equi = Join((Get(T, D), Get(U, D)), ((0, 1),))
    assert estimate_rows(_desc(equi), {T: 10, U: 1000}) == 1000
    mixed = Join((Get(T, D), Get(U, D), Get(T, D)), ((0, 1),))
    assert estimate_rows(_desc(mixed), {T: 10, U: 1000}) == 10_000


def test_unions_add_and_top_k_bounds() -> None:
    plan = Union((Get(T, D), Get(U, D)))
    assert estimate_rows(_desc(plan), {T: 10, U: 5}) == 15
    top = TopK(_cross(2), limit=3)
    assert estimate_rows(_desc(top), {T: 10}) == 100  # the join below it is computed
    assert estimate_rows(_desc(Get(T, D)), {}) == 0


def test_only_dataflows_exporting_transient_collections_are_one_offs() -> None:
    assert is_one_off(_desc(Get(T, D)))
    assert not is_one_off(_desc(Get(T, D), export=GlobalId.user(9)))
