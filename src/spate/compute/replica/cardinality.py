"""How many rows a one-off dataflow would produce, estimated before it is built.

A one-off read that joins without join keys (``SELECT * FROM t, t, t, …``) grows as the
product of its inputs: a twelve-way cross join of a ten-row table is 10^12 rows, which the
replica's Spark would compute and hold for hours, and no client can take. The replica refuses to
build a one-off whose estimate exceeds ``max_one_off_rows`` (:class:`~spate.protocol.compute.
ComputeParameters`), answering SQLSTATE ``53200`` (out of memory) as PostgreSQL does when a
statement needs more memory than it may use.

:func:`estimate_rows` is pure. For each plan node, from the inputs' row counts:

* a ``Get`` of an import: its row count (the updates of its shard or arrangement);
  of an object built earlier in the dataflow: that object's estimate;
* ``Constant``: its rows; ``Reduce`` without a key: 1; ``TopK``: at most ``offset + limit``;
* ``Union``: the sum;
* ``Join``: the inputs are grouped by the equivalences that connect them; a connected group is
  estimated by its largest input (an equi-join is taken to match rows one to one), and the
  groups multiply (between them it is a cross join);
* every other node: its input's estimate (filters and maps are not assumed to drop rows).

So the estimate is exact for cross joins of unfiltered inputs and makes no claim for equi-joins
beyond their largest input: it is a guard against products, not a cost model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription
from spate.plan.relation import Constant, Get, Join, Reduce, RelationExpr, TopK, Union

DEFAULT_MAX_ONE_OFF_ROWS: Final = 10**8
"""The estimate beyond which a one-off is refused when ``max_one_off_rows`` is not set. (A
seven-way cross join of a ten-row table, 10^7 rows, already ran a replica's JVM out of its
default heap under ``count(*)``; 10^8 leaves room for a larger heap.)"""


def is_one_off(desc: DataflowDescription) -> bool:
    """The dataflow exports only transient collections (a one-off read's)."""
    ids = desc.export_ids()
    return bool(ids) and all(i.is_transient() for i in ids)


def estimate_rows(desc: DataflowDescription, input_rows: Mapping[GlobalId, int]) -> int:
    """The estimated rows of the largest collection ``desc`` computes, its objects' outputs and
    every intermediate one (module docs): ``count(*)`` of a cross join still computes the join.
    ``input_rows`` maps each import to its row count; a missing import counts 0."""
    built: dict[GlobalId, int] = dict(input_rows)
    largest = 0
    for obj in desc.objects_to_build:
        memo: dict[int, int] = {}
        built[obj.id] = _estimate(obj.plan, built, memo)
        largest = max(largest, *memo.values())
    return largest


def _estimate(plan: RelationExpr, known: Mapping[GlobalId, int], memo: dict[int, int]) -> int:
    hit = memo.get(id(plan))
    if hit is not None:
        return hit
    inputs = [_estimate(i, known, memo) for i in plan.inputs()]
    rows: int
    if isinstance(plan, Get):
        rows = known.get(plan.id, 0)
    elif isinstance(plan, Constant):
        rows = sum(abs(diff) for _, diff in plan.rows)
    elif isinstance(plan, Join):
        rows = _join(plan, inputs)
    elif isinstance(plan, Union):
        rows = sum(inputs)
    elif isinstance(plan, Reduce) and not plan.group_key:
        rows = 1
    elif isinstance(plan, TopK) and plan.limit is not None and not plan.group_key:
        rows = min(inputs[0], plan.offset + plan.limit)
    else:
        rows = max(inputs, default=0)
    memo[id(plan)] = rows
    return rows


def _join(plan: Join, inputs: list[int]) -> int:
    """Connected inputs (through equivalences) count as their largest; groups multiply."""
    owner: list[int] = []
    for i, op in enumerate(plan.operands):
        owner += [i] * op.desc.arity
    parent = list(range(len(inputs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for cls in plan.equivalences:
        members = [owner[c] for c in cls if c < len(owner)]
        for m in members[1:]:
            parent[find(m)] = find(members[0])
    groups: dict[int, int] = {}
    for i, rows in enumerate(inputs):
        root = find(i)
        groups[root] = max(groups.get(root, 0), rows)
    product = 1
    for rows in groups.values():
        product *= rows
    return product
