"""The relational IR: ``Get``, ``Map``, ``Filter``, ``Join``, ``Reduce``….

Every node is a frozen dataclass registered with ``@wire``, validated at construction, and knows
its output ``RelationDesc`` (``node.desc``). A plan refers to collections only through
``Get(id, desc)``. Scalar expressions given to a node are resolved against its input when it is
constructed (:func:`spate.plan.infer.resolve`): names become positions, mixed numeric operands
get explicit casts; the stored fields are the resolved IR, so decoding re-validates and yields an
equal node. Errors start with the node's name and name the column::

    Filter: column 'prise' not found; columns: auction, bidder, price

Semantics: each node denotes a function from the accumulated contents of its inputs (multisets
of rows, multiplicities possibly negative) at a time ``t`` to a multiset, with ``now() = t``.
:mod:`spate.plan.evaluation.relation` is the executable definition. ``Reduce``, ``TopK`` and
``Distinct`` require non-negative multiplicities in their input (an evaluation error otherwise).
Column names exist for people and for schemas; the semantics is positional.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

from spate.ids import GlobalId
from spate.plan.aggregate import AggregateExpr, aggregate_type
from spate.plan.builder import RelationBuilder
from spate.plan.errors import InvalidPlan, PlanTypeError
from spate.plan.expr import ScalarExpr, contains_now, show
from spate.plan.finishing import ColumnOrder
from spate.plan.infer import resolve
from spate.plan.node_checks import (
    bool_predicate,
    fresh_name,
    no_now,
    node_errors,
    output_names,
    positions,
    set_field,
)
from spate.plan.table_func import TableFunc as TableFunc  # re-exported: FlatMap's field type
from spate.plan.table_func import table_func_type
from spate.plan.temporal import TemporalBounds, temporal_bounds
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import Row, ScalarKind
from spate.wire import wire


class RelationExpr(RelationBuilder):
    """Base of the relational IR nodes (the builder methods come from ``RelationBuilder``)."""

    __slots__ = ()
    _desc: RelationDesc

    @property
    def desc(self) -> RelationDesc:
        """The output schema."""
        return self._desc

    def inputs(self) -> tuple[RelationExpr, ...]:
        """The direct inputs, in order."""
        raise NotImplementedError

    def depends_on(self) -> frozenset[GlobalId]:
        """Every collection id this plan reads (through ``Get``)."""
        return frozenset(n.id for n in self.walk() if isinstance(n, Get))

    def walk(self) -> Iterator[RelationExpr]:
        """Every node of the plan, pre-order (shared sub-plans once per occurrence)."""
        stack: list[RelationExpr] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.inputs()))


# --- helpers ---------------------------------------------------------------------------------


def _check_input(value: object, what: str = "input") -> RelationExpr:
    if not isinstance(value, RelationExpr):
        raise InvalidPlan(f"{what} must be a relation expression, got {type(value).__name__}")
    return value


# --- leaves ----------------------------------------------------------------------------------


@wire("plan.get")
@dataclass(frozen=True, slots=True)
class Get(RelationExpr):
    """Read the collection ``id``, whose schema is ``relation``."""

    id: GlobalId
    relation: RelationDesc

    def __post_init__(self) -> None:
        if not isinstance(self.id, GlobalId):
            raise InvalidPlan(f"Get: id must be a GlobalId, got {self.id!r}")
        if not isinstance(self.relation, RelationDesc):
            raise InvalidPlan(f"Get {self.id}: relation must be a RelationDesc")

    @property
    def desc(self) -> RelationDesc:
        return self.relation

    def inputs(self) -> tuple[RelationExpr, ...]:
        return ()


@wire("plan.constant")
@dataclass(frozen=True, slots=True)
class Constant(RelationExpr):
    """The fixed collection ``rows`` (each ``(row, multiplicity)``), at every time."""

    rows: tuple[tuple[Row, int], ...]
    relation: RelationDesc

    def __post_init__(self) -> None:
        with node_errors("Constant"):
            rows = tuple((tuple(r), d) for r, d in self.rows)
            for i, (row, diff) in enumerate(rows):
                self.relation.validate_row(row, collection="Constant", row_index=i)
                if isinstance(diff, bool) or not isinstance(diff, int) or diff == 0:
                    raise InvalidPlan(f"row {i}: multiplicity must be a non-zero int, got {diff!r}")
            set_field(self, "rows", rows)

    @property
    def desc(self) -> RelationDesc:
        return self.relation

    def inputs(self) -> tuple[RelationExpr, ...]:
        return ()


# --- row-by-row ------------------------------------------------------------------------------


@wire("plan.map")
@dataclass(frozen=True, slots=True)
class Map(RelationExpr):
    """Append the columns ``scalars`` (named ``names``); each may use the ones before it."""

    input: RelationExpr
    scalars: tuple[ScalarExpr, ...]
    names: tuple[str, ...] = ()
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Map"):
            inp = _check_input(self.input)
            scalars = tuple(self.scalars)
            arity = inp.desc.arity
            taken = set(inp.desc.names)
            names = output_names(
                self.names, len(scalars), [f"col{arity + i}" for i in range(len(scalars))], taken
            )
            cols = list(inp.desc.columns)
            resolved: list[ScalarExpr] = []
            for name, s in zip(names, scalars, strict=True):
                r, t = resolve(s, cols)
                no_now(r, [c.name for c in cols])
                resolved.append(r)
                cols.append(Column(name, t.type, t.nullable))
            set_field(self, "scalars", tuple(resolved))
            set_field(self, "names", names)
            set_field(self, "_desc", RelationDesc(cols))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@wire("plan.filter")
@dataclass(frozen=True, slots=True)
class Filter(RelationExpr):
    """Keep the rows for which every predicate is TRUE (NULL and FALSE drop the row).

    Predicates on ``now()`` make a temporal filter: see :mod:`spate.plan.temporal` and
    :meth:`temporal_bounds`.
    """

    input: RelationExpr
    predicates: tuple[ScalarExpr, ...]
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Filter"):
            inp = _check_input(self.input)
            cols = inp.desc.columns
            names = inp.desc.names
            resolved: list[ScalarExpr] = []
            for p in self.predicates:
                r, t = resolve(p, cols)
                bool_predicate(r, t, names)
                resolved.append(r)
            temporal_bounds(resolved, names)  # rejects unsupported uses of now()
            set_field(self, "predicates", tuple(resolved))
            set_field(self, "_desc", inp.desc)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)

    def temporal_bounds(self) -> TemporalBounds:
        """The predicates split into ordinary ones and bounds on the logical time."""
        return temporal_bounds(self.predicates, self.input.desc.names)

    def is_temporal(self) -> bool:
        return any(contains_now(p) for p in self.predicates)


@wire("plan.project")
@dataclass(frozen=True, slots=True)
class Project(RelationExpr):
    """Keep the columns at ``outputs`` (in that order, repeats allowed), optionally renamed."""

    input: RelationExpr
    outputs: tuple[int, ...]
    names: tuple[str, ...] | None = None
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Project"):
            inp = _check_input(self.input)
            outputs = positions(self.outputs, inp.desc.arity, "output", inp.desc)
            cols = [inp.desc.columns[p] for p in outputs]
            names = None if self.names is None else tuple(self.names)
            if names is not None:
                if len(names) != len(outputs):
                    raise InvalidPlan(f"{len(outputs)} outputs but {len(names)} names")
                cols = [dataclasses.replace(c, name=n) for c, n in zip(cols, names, strict=True)]
            seen: set[str] = set()
            for c in cols:
                if c.name in seen:
                    raise InvalidPlan(f"duplicate output column {c.name!r}; give names")
                seen.add(c.name)
            set_field(self, "outputs", outputs)
            set_field(self, "names", names)
            set_field(self, "_desc", RelationDesc(cols))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@wire("plan.flat_map")
@dataclass(frozen=True, slots=True)
class FlatMap(RelationExpr):
    """Each input row, once per row of ``func(exprs)``, with the function's column appended."""

    input: RelationExpr
    func: TableFunc
    exprs: tuple[ScalarExpr, ...]
    names: tuple[str, ...] = ()
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("FlatMap"):
            inp = _check_input(self.input)
            cols = inp.desc.columns
            names_in = inp.desc.names
            typed = [resolve(e, cols) for e in self.exprs]
            for r, _ in typed:
                no_now(r, names_in)
            out = table_func_type(TableFunc(self.func), [t for _, t in typed])
            names = output_names(self.names, 1, [self.func.value], set(names_in))
            set_field(self, "exprs", tuple(r for r, _ in typed))
            set_field(self, "names", names)
            set_field(
                self, "_desc", RelationDesc([*cols, Column(names[0], out.type, out.nullable)])
            )

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


# --- joins, reductions -----------------------------------------------------------------------


@wire("plan.join")
@dataclass(frozen=True, slots=True)
class Join(RelationExpr):
    """The inner join of ``inputs`` (n ≥ 2) on equivalence classes of columns.

    Positions in ``equivalences`` and ``predicates`` refer to the concatenation of the inputs'
    columns. A row combination is kept iff, for every class, all its columns are non-NULL and
    equal, and every residual predicate is TRUE; its multiplicity is the product of the inputs'
    multiplicities. No classes: the cross join. Output names: the inputs' names, a repeated name
    getting the suffix ``_1``, ``_2``… (a self-join of ``(a, b)`` is ``(a, b, a_1, b_1)``).
    """

    operands: tuple[RelationExpr, ...]
    equivalences: tuple[tuple[int, ...], ...] = ()
    predicates: tuple[ScalarExpr, ...] = ()
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Join"):
            inputs = tuple(_check_input(i, "join input") for i in self.operands)
            if len(inputs) < 2:
                raise InvalidPlan(f"a join needs at least 2 inputs, got {len(inputs)}")
            taken: set[str] = set()
            cols: list[Column] = []
            for inp in inputs:
                for c in inp.desc.columns:
                    cols.append(dataclasses.replace(c, name=fresh_name(c.name, taken)))
            desc = RelationDesc(cols)
            classes: list[tuple[int, ...]] = []
            for cls in self.equivalences:
                members = positions(cls, len(cols), "equivalence", desc)
                if len(members) < 2:
                    raise InvalidPlan(f"an equivalence class needs 2 or more columns: {members}")
                kinds = {cols[p].type.kind for p in members}
                if len(kinds) != 1:
                    shown = ", ".join(f"{cols[p].name} ({cols[p].type})" for p in members)
                    raise PlanTypeError(f"equated columns have different types: {shown}")
                classes.append(members)
            resolved: list[ScalarExpr] = []
            for p in self.predicates:
                r, t = resolve(p, cols)
                bool_predicate(r, t, desc.names)
                no_now(r, desc.names)
                resolved.append(r)
            set_field(self, "operands", inputs)
            set_field(self, "equivalences", tuple(classes))
            set_field(self, "predicates", tuple(resolved))
            set_field(self, "_desc", desc)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return self.operands

    def input_offsets(self) -> tuple[int, ...]:
        """The position of each input's first column in the output."""
        offsets, at = [], 0
        for i in self.operands:
            offsets.append(at)
            at += i.desc.arity
        return tuple(offsets)


@wire("plan.reduce")
@dataclass(frozen=True, slots=True)
class Reduce(RelationExpr):
    """Group by the columns ``group_key``; output the key columns, then one per aggregate.

    One output row per group with at least one row (see :mod:`spate.plan.aggregate`).
    """

    input: RelationExpr
    group_key: tuple[int, ...]
    aggregates: tuple[AggregateExpr, ...] = ()
    names: tuple[str, ...] = ()
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Reduce"):
            inp = _check_input(self.input)
            key = positions(self.group_key, inp.desc.arity, "group key", inp.desc)
            cols = [inp.desc.columns[p] for p in key]
            taken = {c.name for c in cols}
            aggs = tuple(self.aggregates)
            names = output_names(self.names, len(aggs), [a.func.value for a in aggs], taken)
            resolved: list[AggregateExpr] = []
            for name, agg in zip(names, aggs, strict=True):
                if not isinstance(agg, AggregateExpr):
                    raise InvalidPlan(f"not an aggregate: {agg!r}")
                r, t = resolve(agg.expr, inp.desc.columns)
                no_now(r, inp.desc.names)
                try:
                    out = aggregate_type(agg.func, t)
                except PlanTypeError as e:
                    raise PlanTypeError(f"{name}: {e}: {show(r, inp.desc.names)}") from None
                resolved.append(dataclasses.replace(agg, expr=r))
                cols.append(Column(name, out.type, out.nullable))
            set_field(self, "group_key", key)
            set_field(self, "aggregates", tuple(resolved))
            set_field(self, "names", names)
            set_field(self, "_desc", RelationDesc(cols))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@wire("plan.top_k")
@dataclass(frozen=True, slots=True)
class TopK(RelationExpr):
    """Per group of ``group_key``: the rows ranked ``offset+1 … offset+limit`` by ``order_by``.

    Rows are ordered by ``order_by`` (PostgreSQL NULL placement), then by the whole row
    ascending (NULLs last) so that ties are deterministic; a row of multiplicity ``n`` takes
    ``n`` ranks. ``limit = None``: no limit.
    """

    input: RelationExpr
    group_key: tuple[int, ...] = ()
    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("TopK"):
            inp = _check_input(self.input)
            desc = inp.desc
            key = positions(self.group_key, desc.arity, "group key", desc)
            order = tuple(self.order_by)
            for o in order:
                if not isinstance(o, ColumnOrder):
                    raise InvalidPlan(f"order_by takes ColumnOrder values, got {o!r}")
                positions([o.column], desc.arity, "order by", desc)
                if desc.columns[o.column].type.kind is ScalarKind.JSONB:
                    raise PlanTypeError(f"cannot order by jsonb column {desc.names[o.column]!r}")
            if self.limit is not None and (
                isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0
            ):
                raise InvalidPlan(f"limit must be None or an int >= 0, got {self.limit!r}")
            if isinstance(self.offset, bool) or not isinstance(self.offset, int) or self.offset < 0:
                raise InvalidPlan(f"offset must be an int >= 0, got {self.offset!r}")
            set_field(self, "group_key", key)
            set_field(self, "order_by", order)
            set_field(self, "_desc", desc)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


# --- multiset algebra ------------------------------------------------------------------------


@wire("plan.distinct")
@dataclass(frozen=True, slots=True)
class Distinct(RelationExpr):
    """Each row present (multiplicity > 0) once."""

    input: RelationExpr
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Distinct"):
            set_field(self, "_desc", _check_input(self.input).desc)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@wire("plan.negate")
@dataclass(frozen=True, slots=True)
class Negate(RelationExpr):
    """Every multiplicity negated."""

    input: RelationExpr
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Negate"):
            set_field(self, "_desc", _check_input(self.input).desc)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@wire("plan.threshold")
@dataclass(frozen=True, slots=True)
class Threshold(RelationExpr):
    """The rows with positive multiplicity, with that multiplicity; the others dropped."""

    input: RelationExpr
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Threshold"):
            set_field(self, "_desc", _check_input(self.input).desc)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@wire("plan.union")
@dataclass(frozen=True, slots=True)
class Union(RelationExpr):
    """The sum of the inputs' multiplicities (UNION ALL). Names come from the first input."""

    operands: tuple[RelationExpr, ...]
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Union"):
            inputs = tuple(_check_input(i, "union input") for i in self.operands)
            if not inputs:
                raise InvalidPlan("a union needs at least one input")
            first = inputs[0].desc
            nullable = [c.nullable for c in first.columns]
            for n, inp in enumerate(inputs[1:], start=1):
                d = inp.desc
                if d.arity != first.arity:
                    raise PlanTypeError(
                        f"input {n} has {d.arity} columns ({', '.join(d.names)}), input 0 has "
                        f"{first.arity} ({', '.join(first.names)})"
                    )
                for i, (a, b) in enumerate(zip(first.columns, d.columns, strict=True)):
                    if a.type != b.type:
                        raise PlanTypeError(
                            f"column {i} ({a.name!r}) is {a.type} in input 0 but {b.type} "
                            f"in input {n}"
                        )
                    nullable[i] = nullable[i] or b.nullable
            cols = [
                dataclasses.replace(c, nullable=nl)
                for c, nl in zip(first.columns, nullable, strict=True)
            ]
            set_field(self, "operands", inputs)
            set_field(self, "_desc", RelationDesc(cols))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return self.operands


@wire("plan.arrange_by")
@dataclass(frozen=True, slots=True)
class ArrangeBy(RelationExpr):
    """The input unchanged, arranged (indexed) by each key in ``keys``: a hint to renderers."""

    input: RelationExpr
    keys: tuple[tuple[int, ...], ...]
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("ArrangeBy"):
            inp = _check_input(self.input)
            keys = tuple(positions(k, inp.desc.arity, "key", inp.desc) for k in self.keys)
            set_field(self, "keys", keys)
            set_field(self, "_desc", inp.desc)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


NODE_TYPES: tuple[type[RelationExpr], ...] = (
    Get,
    Constant,
    Map,
    Filter,
    Project,
    FlatMap,
    Join,
    Reduce,
    TopK,
    Distinct,
    Negate,
    Threshold,
    Union,
    ArrangeBy,
)
"""Every relational node type (for exhaustive matches and round-trip tests)."""
