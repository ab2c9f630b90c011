"""Small two-input equi-joins computed on the driver with pyarrow, without a Spark job.

A join step whose parts are already Arrow tables on the driver (a small delta, and the other
input's rows of its keys looked up in an arrangement: :meth:`JoinNode._looked_up` and
:func:`spate.render.operators.join_history.touched_groups`) is a few thousand rows: pyarrow
joins them in about a millisecond, where Spark takes a job (~40-150 ms here) and the plan's
analysis. :func:`join_on_driver` computes the join of two such tables as the Spark terms do —
each output row's time the later of its parts' times, its diff the product of theirs — for
joins that are

* of two inputs, with no residual predicate;
* on equivalence classes of exactly one column of each input, both of one type among bool,
  int64, text, date and timestamp (a NULL key matches nothing, as in Spark's ``=``).

Anything else, or a diff product beyond int64, returns ``None`` (the caller takes the Spark
path).
"""

from __future__ import annotations

from typing import Final, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.plan.expr import ScalarExpr
from spate.render.key_index import as_int64, indexable
from spate.render.layout import col_name, internal_schema
from spate.render.operators.node import Node
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import ScalarKind


class JoinShape(Protocol):
    """What the driver reads of a join (:class:`~spate.render.operators.join.JoinNode`)."""

    inputs: tuple[Node, ...]
    equivalences: tuple[tuple[int, ...], ...]
    predicates: tuple[ScalarExpr, ...]
    desc: RelationDesc
    offsets: tuple[int, ...]
    owner: dict[int, int]


K = ScalarKind
_KEY_KINDS: Final = frozenset({K.BOOL, K.INT64, K.TEXT, K.DATE, K.TIMESTAMP})


def key_columns(join: JoinShape) -> tuple[list[int], list[int]] | None:
    """Each class's column of input 0 and of input 1 (input column positions), when
    :func:`join_on_driver` can compute ``join`` (module docs); else ``None``."""
    if len(join.inputs) != 2 or join.predicates or not join.equivalences:
        return None
    left: list[int] = []
    right: list[int] = []
    for cls in join.equivalences:
        if len(cls) != 2:
            return None
        a, b = sorted(cls, key=lambda p: join.owner[p])
        if join.owner[a] != 0 or join.owner[b] != 1:
            return None
        ta = join.inputs[0].desc.columns[a - join.offsets[0]].type
        tb = join.inputs[1].desc.columns[b - join.offsets[1]].type
        if ta != tb or ta.kind not in _KEY_KINDS:
            return None
        left.append(a - join.offsets[0])
        right.append(b - join.offsets[1])
    return left, right


def join_on_driver(join: JoinShape, left: pa.Table, right: pa.Table) -> pa.Table | None:
    """The join of input 0's updates ``left`` and input 1's ``right`` (internal layouts of
    the inputs), consolidated, in the join's internal layout; ``None`` when the Spark path
    must compute it (module docs)."""
    keys = key_columns(join)
    if keys is None:
        return None
    parts = []
    for n, (table, cols) in enumerate(zip((left, right), keys, strict=True)):
        offset = join.offsets[n]
        arity = join.inputs[n].desc.arity
        for c in cols:  # NULL keys match nothing
            table = table.filter(pc.is_valid(table.column(col_name(c))))
        names = [col_name(offset + k) for k in range(arity)]
        parts.append(
            table.select(
                [*(col_name(k) for k in range(arity)), TIME_COLUMN, DIFF_COLUMN]
            ).rename_columns([*names, f"_t{n}", f"_d{n}"])
        )
    lk = [col_name(join.offsets[0] + c) for c in keys[0]]
    rk = [col_name(join.offsets[1] + c) for c in keys[1]]
    joined = _int_join(parts[0], parts[1], lk, rk)
    if joined is None:
        joined = parts[0].join(
            parts[1],
            keys=lk,
            right_keys=rk,
            join_type="inner",
            coalesce_keys=False,
            use_threads=False,
        )
    try:
        diff = pc.multiply_checked(joined.column("_d0"), joined.column("_d1"))
    except pa.ArrowInvalid:
        return None
    schema = internal_schema(join.desc)
    arrays = [joined.column(col_name(i)) for i in range(join.desc.arity)]
    arrays.append(pc.max_element_wise(joined.column("_t0"), joined.column("_t1")))
    arrays.append(diff)
    arrays = [a.cast(schema.field(i).type) for i, a in enumerate(arrays)]
    return consolidate(pa.Table.from_arrays(arrays, schema=schema))


def _int_join(left: pa.Table, right: pa.Table, lk: list[str], rk: list[str]) -> pa.Table | None:
    """The inner join of ``left`` and ``right`` on one integer-like key column of each (of
    one type, no NULL), by sorting ``right``'s keys and finding each left key's run in them
    (numpy), both sides' columns side by side; ``None`` for other keys (pyarrow joins them:
    its hash join costs ~0.3 ms to start whatever the rows)."""
    if len(lk) != 1:
        return None
    a, b = left.column(lk[0]), right.column(rk[0])
    if a.type != b.type or not indexable(a) or not indexable(b):
        return None
    ka, kb = as_int64(a), as_int64(b)
    order = np.argsort(kb, kind="stable")
    sorted_b = kb[order]
    start = np.searchsorted(sorted_b, ka, side="left")
    count = np.searchsorted(sorted_b, ka, side="right") - start
    li = np.repeat(np.arange(len(ka), dtype=np.int64), count)
    # each left row's matches: its run start plus 0, 1, … within the run
    offsets = np.arange(len(li), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    ri = order[np.repeat(start, count) + offsets]
    picked_left = left.take(pa.array(li))
    picked_right = right.take(pa.array(ri))
    columns = [*picked_left.columns, *picked_right.columns]
    names = [*left.column_names, *right.column_names]
    return pa.Table.from_arrays(columns, names=names)
