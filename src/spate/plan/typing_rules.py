"""The typing rules of the relational nodes: from the inputs' schemas and a node's parameters,
the parameters as the node stores them (scalars resolved, positions checked, names settled) and
the node's output ``RelationDesc``.

Each rule is a function of schemas and values only (no nodes); :mod:`spate.plan.relation` calls
it when a node is built, inside ``node_errors(<node name>)`` so that errors name the node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from spate.plan.aggregate import AggregateExpr, aggregate_type
from spate.plan.errors import InvalidPlan, PlanTypeError
from spate.plan.expr import ScalarExpr, show
from spate.plan.finishing import ColumnOrder
from spate.plan.infer import resolve
from spate.plan.node_checks import bool_predicate, fresh_name, no_now, output_names, positions
from spate.plan.table_func import TableFunc, table_func_type
from spate.plan.temporal import temporal_bounds
from spate.plan.window_func import (
    DEFAULT_FRAME,
    WindowCall,
    WindowFrame,
    func_name,
    reads_frame,
    resolve_call,
)
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import Row, ScalarKind

Names = tuple[str, ...]


def constant_rows(
    rows: Sequence[tuple[Row, int]], relation: RelationDesc
) -> tuple[tuple[Row, int], ...]:
    """``Constant``: the rows as tuples, each valid for ``relation``, multiplicities non-zero."""
    checked = tuple((tuple(r), d) for r, d in rows)
    for i, (row, diff) in enumerate(checked):
        relation.validate_row(row, collection="Constant", row_index=i)
        if isinstance(diff, bool) or not isinstance(diff, int) or diff == 0:
            raise InvalidPlan(f"row {i}: multiplicity must be a non-zero int, got {diff!r}")
    return checked


def map_columns(
    inp: RelationDesc, scalars: Sequence[ScalarExpr], names: Sequence[str]
) -> tuple[tuple[ScalarExpr, ...], Names, RelationDesc]:
    """``Map``: each scalar resolved against the input and the columns appended before it."""
    scalars = tuple(scalars)
    arity = inp.arity
    settled = output_names(
        names, len(scalars), [f"col{arity + i}" for i in range(len(scalars))], set(inp.names)
    )
    cols = list(inp.columns)
    resolved: list[ScalarExpr] = []
    for name, s in zip(settled, scalars, strict=True):
        r, t = resolve(s, cols)
        no_now(r, [c.name for c in cols])
        resolved.append(r)
        cols.append(Column(name, t.type, t.nullable))
    return tuple(resolved), settled, RelationDesc(cols)


def filter_predicates(
    inp: RelationDesc, predicates: Sequence[ScalarExpr]
) -> tuple[ScalarExpr, ...]:
    """``Filter``: boolean predicates; ``now()`` only in the temporal forms (the desc is the
    input's)."""
    resolved: list[ScalarExpr] = []
    for p in predicates:
        r, t = resolve(p, inp.columns)
        bool_predicate(r, t, inp.names)
        resolved.append(r)
    temporal_bounds(resolved, inp.names)  # rejects unsupported uses of now()
    return tuple(resolved)


def project_columns(
    inp: RelationDesc, outputs: Sequence[int], names: Sequence[str] | None
) -> tuple[tuple[int, ...], Names | None, RelationDesc]:
    """``Project``: the kept positions, optionally renamed; output names must be distinct."""
    kept = positions(outputs, inp.arity, "output", inp)
    cols = [inp.columns[p] for p in kept]
    settled = None if names is None else tuple(names)
    if settled is not None:
        if len(settled) != len(kept):
            raise InvalidPlan(f"{len(kept)} outputs but {len(settled)} names")
        cols = [dataclasses.replace(c, name=n) for c, n in zip(cols, settled, strict=True)]
    seen: set[str] = set()
    for c in cols:
        if c.name in seen:
            raise InvalidPlan(f"duplicate output column {c.name!r}; give names")
        seen.add(c.name)
    return kept, settled, RelationDesc(cols)


def flat_map_column(
    inp: RelationDesc, func: TableFunc, exprs: Sequence[ScalarExpr], names: Sequence[str]
) -> tuple[tuple[ScalarExpr, ...], Names, RelationDesc]:
    """``FlatMap``: the table function's arguments resolved, its column appended."""
    typed = [resolve(e, inp.columns) for e in exprs]
    for r, _ in typed:
        no_now(r, inp.names)
    out = table_func_type(TableFunc(func), [t for _, t in typed])
    settled = output_names(names, 1, [func.value], set(inp.names))
    desc = RelationDesc([*inp.columns, Column(settled[0], out.type, out.nullable)])
    return tuple(r for r, _ in typed), settled, desc


def join_columns(
    inputs: Sequence[RelationDesc],
    equivalences: Sequence[Sequence[int]],
    predicates: Sequence[ScalarExpr],
) -> tuple[tuple[tuple[int, ...], ...], tuple[ScalarExpr, ...], RelationDesc]:
    """``Join``: the inputs' columns concatenated (repeated names suffixed), equivalence classes
    of same-kind columns, boolean residual predicates without ``now()``."""
    if len(inputs) < 2:
        raise InvalidPlan(f"a join needs at least 2 inputs, got {len(inputs)}")
    taken: set[str] = set()
    cols: list[Column] = []
    for inp in inputs:
        for c in inp.columns:
            cols.append(dataclasses.replace(c, name=fresh_name(c.name, taken)))
    desc = RelationDesc(cols)
    classes: list[tuple[int, ...]] = []
    for cls in equivalences:
        members = positions(cls, len(cols), "equivalence", desc)
        if len(members) < 2:
            raise InvalidPlan(f"an equivalence class needs 2 or more columns: {members}")
        kinds = {cols[p].type.kind for p in members}
        if len(kinds) != 1:
            shown = ", ".join(f"{cols[p].name} ({cols[p].type})" for p in members)
            raise PlanTypeError(f"equated columns have different types: {shown}")
        classes.append(members)
    resolved: list[ScalarExpr] = []
    for p in predicates:
        r, t = resolve(p, cols)
        bool_predicate(r, t, desc.names)
        no_now(r, desc.names)
        resolved.append(r)
    return tuple(classes), tuple(resolved), desc


def reduce_columns(
    inp: RelationDesc,
    group_key: Sequence[int],
    aggregates: Sequence[AggregateExpr],
    names: Sequence[str],
) -> tuple[tuple[int, ...], tuple[AggregateExpr, ...], Names, RelationDesc]:
    """``Reduce``: the key columns, then one column per aggregate, typed by
    :func:`spate.plan.aggregate.aggregate_type`."""
    key = positions(group_key, inp.arity, "group key", inp)
    cols = [inp.columns[p] for p in key]
    aggs = tuple(aggregates)
    settled = output_names(names, len(aggs), [a.func.value for a in aggs], {c.name for c in cols})
    resolved: list[AggregateExpr] = []
    for name, agg in zip(settled, aggs, strict=True):
        if not isinstance(agg, AggregateExpr):
            raise InvalidPlan(f"not an aggregate: {agg!r}")
        r, t = resolve(agg.expr, inp.columns)
        no_now(r, inp.names)
        try:
            out = aggregate_type(agg.func, t)
        except PlanTypeError as e:
            raise PlanTypeError(f"{name}: {e}: {show(r, inp.names)}") from None
        resolved.append(dataclasses.replace(agg, expr=r))
        cols.append(Column(name, out.type, out.nullable))
    return key, tuple(resolved), settled, RelationDesc(cols)


def sort_order(inp: RelationDesc, order_by: Sequence[ColumnOrder]) -> tuple[ColumnOrder, ...]:
    """An ``order_by`` of ``TopK`` or ``Window``: ``ColumnOrder`` values on orderable columns."""
    order = tuple(order_by)
    for o in order:
        if not isinstance(o, ColumnOrder):
            raise InvalidPlan(f"order_by takes ColumnOrder values, got {o!r}")
        positions([o.column], inp.arity, "order by", inp)
        if inp.columns[o.column].type.kind is ScalarKind.JSONB:
            raise PlanTypeError(f"cannot order by jsonb column {inp.names[o.column]!r}")
    return order


def top_k_bounds(limit: object, offset: object) -> None:
    """``TopK``: ``limit`` is None or an int >= 0, ``offset`` an int >= 0."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidPlan(f"limit must be None or an int >= 0, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidPlan(f"offset must be an int >= 0, got {offset!r}")


def union_columns(inputs: Sequence[RelationDesc]) -> RelationDesc:
    """``Union``: inputs of one arity and equal column types; names from the first input, a
    column nullable when it is in any input."""
    if not inputs:
        raise InvalidPlan("a union needs at least one input")
    first = inputs[0]
    nullable = [c.nullable for c in first.columns]
    for n, d in enumerate(inputs[1:], start=1):
        if d.arity != first.arity:
            raise PlanTypeError(
                f"input {n} has {d.arity} columns ({', '.join(d.names)}), input 0 has "
                f"{first.arity} ({', '.join(first.names)})"
            )
        for i, (a, b) in enumerate(zip(first.columns, d.columns, strict=True)):
            if a.type != b.type:
                raise PlanTypeError(
                    f"column {i} ({a.name!r}) is {a.type} in input 0 but {b.type} in input {n}"
                )
            nullable[i] = nullable[i] or b.nullable
    return RelationDesc(
        [dataclasses.replace(c, nullable=nl) for c, nl in zip(first.columns, nullable, strict=True)]
    )


def window_columns(
    inp: RelationDesc,
    funcs: Sequence[WindowCall],
    names: Sequence[str],
    frames: Sequence[WindowFrame],
) -> tuple[tuple[WindowCall, ...], Names, tuple[WindowFrame, ...], RelationDesc]:
    """``Window``: the input's columns, then one per function (typed by
    :func:`spate.plan.window_func.resolve_call` with its frame); output names must be distinct.

    ``frames`` holds one frame per function, or none (every function's the default); a function
    that does not read its frame gets :data:`~spate.plan.window_func.DEFAULT_FRAME`, so that
    equal windows compare equal."""
    funcs = tuple(funcs)
    if not funcs:
        raise InvalidPlan("a window needs at least one function")
    if not isinstance(frames, (tuple, list)):
        raise InvalidPlan(f"frames must be a tuple of WindowFrame, one per function: {frames!r}")
    frames = tuple(frames) or (DEFAULT_FRAME,) * len(funcs)
    if len(frames) != len(funcs):
        raise InvalidPlan(f"{len(funcs)} window functions but {len(frames)} frames")
    for fr in frames:
        if not isinstance(fr, WindowFrame):
            raise InvalidPlan(f"a frame must be a WindowFrame, got {fr!r}")
    defaults = [func_name(f) for f in funcs]
    settled = output_names(names, len(funcs), defaults, set(inp.names))
    cols = list(inp.columns)
    resolved: list[WindowCall] = []
    kept: list[WindowFrame] = []
    for name, f, frame in zip(settled, funcs, frames, strict=True):
        try:
            r, t = resolve_call(f, inp.columns, frame)
        except InvalidPlan as e:
            raise type(e)(f"{name}: {e}") from None
        resolved.append(r)
        kept.append(frame if reads_frame(r) else DEFAULT_FRAME)
        cols.append(Column(name, t.type, t.nullable))
    taken: set[str] = set()
    for c in cols:
        if c.name in taken:
            raise InvalidPlan(f"duplicate output column {c.name!r}; give other names")
        taken.add(c.name)
    return tuple(resolved), settled, tuple(kept), RelationDesc(cols)
