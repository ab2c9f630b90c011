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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from spate.ids import GlobalId
from spate.plan import arguments as spec
from spate.plan import explain as text
from spate.plan import typing_rules as rules
from spate.plan.aggregate import AggregateExpr
from spate.plan.arguments import ColumnSpec, SortSpec
from spate.plan.errors import InvalidPlan
from spate.plan.expr import ScalarExpr, contains_now, lift
from spate.plan.finishing import ColumnOrder
from spate.plan.node_checks import node_errors, positions, set_field
from spate.plan.table_func import TableFunc as TableFunc  # re-exported: FlatMap's field type
from spate.plan.temporal import TemporalBounds, temporal_bounds
from spate.plan.window_func import DEFAULT_FRAME, WindowExpr, WindowFrame
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.wire import wire


class RelationExpr:
    """Base of the relational IR nodes, with the fluent builder methods that make new ones."""

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

    def explain(self) -> str:
        """The plan as indented text with column names (see :mod:`spate.plan.explain`)."""
        return text.explain(self)

    def explain_line(self, names: Sequence[str]) -> str:
        """This node's line of :meth:`explain` (``names``: see :mod:`spate.plan.explain`)."""
        return type(self).__name__

    # --- the fluent builder (see :mod:`spate.plan.builder`) -----------------------------------

    def filter(self, *predicates: ScalarExpr) -> Filter:
        """Keep rows where every predicate is TRUE."""
        return Filter(self, tuple(predicates))

    def map(self, **columns: object) -> Map:
        """Append columns: ``.map(total=col("price") * col("qty"))`` (in argument order)."""
        return Map(self, tuple(lift(v) for v in columns.values()), tuple(columns))

    def project(self, *columns: ColumnSpec) -> Project:
        """Keep these columns, in this order."""
        return Project(self, spec.columns(self.desc, columns))

    def select(self, *columns: ColumnSpec, **computed: object) -> RelationExpr:
        """Keep ``columns``, then the ``computed`` ones: ``.select("id", total=col("a") + 1)``."""
        kept = spec.columns(self.desc, columns)
        if not computed:
            return Project(self, kept)
        mapped = Map(self, tuple(lift(v) for v in computed.values()), tuple(computed))
        arity = self.desc.arity
        return Project(mapped, (*kept, *range(arity, arity + len(computed))))

    def rename(self, **names: str) -> Project:
        """Rename columns: ``.rename(price="top_price")`` (old name = new name)."""
        return Project(self, tuple(range(self.desc.arity)), spec.renamed(self.desc, names))

    def flat_map(self, func: str, *args: object, name: str | None = None) -> FlatMap:
        """``.flat_map("generate_series", 1, col("n"), name="i")``; also ``unnest``,
        ``string_to_table``."""
        f = TableFunc(func)
        return FlatMap(self, f, tuple(lift(a) for a in args), () if name is None else (name,))

    def join(
        self,
        other: RelationExpr,
        on: Sequence[str | tuple[ColumnSpec, ColumnSpec]] = (),
        *,
        where: Sequence[ScalarExpr] = (),
    ) -> Join:
        """Inner join; ``on`` lists ``(left column, right column)`` pairs, or one name present on
        both sides. ``where`` holds residual predicates over the output columns."""
        return Join((self, other), spec.join_classes(self.desc, other.desc, on), tuple(where))

    def cross_join(self, *others: RelationExpr) -> Join:
        return Join((self, *others))

    def reduce(self, group_key: Sequence[ColumnSpec] = (), **aggregates: AggregateExpr) -> Reduce:
        """Group by ``group_key``; ``.reduce(["auction"], top=max_(col("price")))``."""
        key = spec.columns(self.desc, group_key, "group key")
        return Reduce(self, key, tuple(aggregates.values()), tuple(aggregates))

    def top_k(
        self,
        group_key: Sequence[ColumnSpec] = (),
        *,
        order_by: Sequence[SortSpec] = (),
        limit: int | None = None,
        offset: int = 0,
    ) -> TopK:
        key = spec.columns(self.desc, group_key, "group key")
        return TopK(self, key, spec.ordering(self.desc, order_by), limit, offset)

    def window(
        self,
        partition_by: Sequence[ColumnSpec] = (),
        *,
        order_by: Sequence[SortSpec] = (),
        frame: WindowFrame = DEFAULT_FRAME,
        frames: Mapping[str, WindowFrame] | None = None,
        **funcs: WindowExpr | AggregateExpr,
    ) -> Window:
        """Window functions over one ``PARTITION BY … ORDER BY …``, appended as columns:
        ``.window(["auction"], order_by=[desc("price")], rn=row_number(),
        prev=lag(col("price")), total=sum_(col("price")))`` (see :mod:`spate.plan.window`).
        Each function reads ``frame``, or its own in ``frames`` (by output name)."""
        key = spec.columns(self.desc, partition_by, "partition by")
        order = spec.ordering(self.desc, order_by)
        own = dict(frames or {})
        unknown = sorted(set(own) - set(funcs))
        if unknown:
            raise InvalidPlan(f"frames for no window function: {', '.join(unknown)}")
        chosen = tuple(own.get(name, frame) for name in funcs)
        return Window(self, key, order, tuple(funcs.values()), tuple(funcs), chosen)

    def distinct(self) -> Distinct:
        return Distinct(self)

    def negate(self) -> Negate:
        return Negate(self)

    def threshold(self) -> Threshold:
        return Threshold(self)

    def union(self, *others: RelationExpr) -> Union:
        """UNION ALL."""
        return Union((self, *others))

    def except_all(self, other: RelationExpr) -> Threshold:
        """SQL ``EXCEPT ALL``: ``Threshold(self + Negate(other))``."""
        return Threshold(Union((self, Negate(other))))

    def arrange_by(self, *keys: Sequence[ColumnSpec]) -> ArrangeBy:
        return ArrangeBy(self, tuple(spec.columns(self.desc, k, "key") for k in keys))


def _check_input(value: object, what: str = "input") -> RelationExpr:
    if not isinstance(value, RelationExpr):
        raise InvalidPlan(f"{what} must be a relation expression, got {type(value).__name__}")
    return value


def _settle(node: object, **fields: object) -> None:
    """Store a node's settled fields (it is frozen)."""
    for name, value in fields.items():
        set_field(node, name, value)


# --- leaves ----------------------------------------------------------------------------------


@wire("plan.get")
@dataclass(frozen=True, slots=True)
class Get(RelationExpr):
    """Read the collection ``id``, whose schema is ``relation``."""

    id: GlobalId
    relation: RelationDesc

    def explain_line(self, names: Sequence[str]) -> str:
        return text.get_line(self.id, self.relation)

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

    def explain_line(self, names: Sequence[str]) -> str:
        return text.constant_line(self.rows, self.relation)

    def __post_init__(self) -> None:
        with node_errors("Constant"):
            _settle(self, rows=rules.constant_rows(self.rows, self.relation))

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

    def explain_line(self, names: Sequence[str]) -> str:
        return text.map_line(names, self.names, self.scalars)

    def __post_init__(self) -> None:
        with node_errors("Map"):
            inp = _check_input(self.input).desc
            scalars, names, desc = rules.map_columns(inp, self.scalars, self.names)
            _settle(self, scalars=scalars, names=names, _desc=desc)

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

    def explain_line(self, names: Sequence[str]) -> str:
        return text.filter_line(names, self.predicates)

    def __post_init__(self) -> None:
        with node_errors("Filter"):
            inp = _check_input(self.input).desc
            _settle(self, predicates=rules.filter_predicates(inp, self.predicates), _desc=inp)

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

    def explain_line(self, names: Sequence[str]) -> str:
        return text.project_line(names, self.outputs, self.desc)

    def __post_init__(self) -> None:
        with node_errors("Project"):
            inp = _check_input(self.input).desc
            outputs, names, desc = rules.project_columns(inp, self.outputs, self.names)
            _settle(self, outputs=outputs, names=names, _desc=desc)

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

    def explain_line(self, names: Sequence[str]) -> str:
        return text.flat_map_line(names, self.names, self.func, self.exprs)

    def __post_init__(self) -> None:
        with node_errors("FlatMap"):
            inp = _check_input(self.input).desc
            exprs, names, desc = rules.flat_map_column(inp, self.func, self.exprs, self.names)
            _settle(self, exprs=exprs, names=names, _desc=desc)

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

    def explain_line(self, names: Sequence[str]) -> str:
        return text.join_line(names, self.equivalences, self.predicates)

    def __post_init__(self) -> None:
        with node_errors("Join"):
            inputs = tuple(_check_input(i, "join input") for i in self.operands)
            descs = [i.desc for i in inputs]
            classes, preds, desc = rules.join_columns(descs, self.equivalences, self.predicates)
            _settle(self, operands=inputs, equivalences=classes, predicates=preds, _desc=desc)

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

    def explain_line(self, names: Sequence[str]) -> str:
        return text.reduce_line(names, self.group_key, self.names, self.aggregates)

    def __post_init__(self) -> None:
        with node_errors("Reduce"):
            inp = _check_input(self.input).desc
            key, aggs, names, desc = rules.reduce_columns(
                inp, self.group_key, self.aggregates, self.names
            )
            _settle(self, group_key=key, aggregates=aggs, names=names, _desc=desc)

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

    def explain_line(self, names: Sequence[str]) -> str:
        return text.top_k_line(names, self.group_key, self.order_by, self.limit, self.offset)

    def __post_init__(self) -> None:
        with node_errors("TopK"):
            inp = _check_input(self.input).desc
            key = positions(self.group_key, inp.arity, "group key", inp)
            order = rules.sort_order(inp, self.order_by)
            rules.top_k_bounds(self.limit, self.offset)
            _settle(self, group_key=key, order_by=order, _desc=inp)

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


@wire("plan.window", 3)
@dataclass(frozen=True, slots=True)
class Window(RelationExpr):
    """The input with one column appended per function in ``funcs``, each computed over the
    row's partition (``partition_by`` columns) sorted once by ``order_by`` (then the
    tie-break), at the row's one position in it; the aggregates and
    ``first_value``/``last_value``/``nth_value`` each over its own frame in ``frames`` (one
    per function; empty: every function's the default). Since every function reads the same
    position, a row's values are those PostgreSQL pairs even among identical rows (see
    :mod:`spate.plan.window` for the semantics, the tie-break and the frames)."""

    input: RelationExpr
    partition_by: tuple[int, ...] = ()
    order_by: tuple[ColumnOrder, ...] = ()
    funcs: tuple[WindowExpr | AggregateExpr, ...] = ()
    names: tuple[str, ...] = ()
    frames: tuple[WindowFrame, ...] = ()
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def explain_line(self, names: Sequence[str]) -> str:
        return text.window_line(
            names, self.partition_by, self.order_by, self.names, self.funcs, self.frames
        )

    def __post_init__(self) -> None:
        with node_errors("Window"):
            inp = _check_input(self.input).desc
            key = positions(self.partition_by, inp.arity, "partition by", inp)
            order = rules.sort_order(inp, self.order_by)
            funcs, names, frames, desc = rules.window_columns(
                inp, self.funcs, self.names, self.frames
            )
            _settle(
                self,
                partition_by=key,
                order_by=order,
                funcs=funcs,
                names=names,
                frames=frames,
                _desc=desc,
            )

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
            _settle(self, operands=inputs, _desc=rules.union_columns([i.desc for i in inputs]))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return self.operands


@wire("plan.arrange_by")
@dataclass(frozen=True, slots=True)
class ArrangeBy(RelationExpr):
    """The input unchanged, arranged (indexed) by each key in ``keys``: a hint to renderers."""

    input: RelationExpr
    keys: tuple[tuple[int, ...], ...]
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def explain_line(self, names: Sequence[str]) -> str:
        return text.arrange_by_line(names, self.keys)

    def __post_init__(self) -> None:
        with node_errors("ArrangeBy"):
            inp = _check_input(self.input).desc
            keys = tuple(positions(k, inp.arity, "key", inp) for k in self.keys)
            _settle(self, keys=keys, _desc=inp)

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
