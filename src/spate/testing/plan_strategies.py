"""Hypothesis strategies for random well-typed plans and for the input streams they read.

For oracle tests ("incremental output at every time == :func:`~spate.testing.reference.evaluate`
on the accumulated input"):

* :func:`plans` — random plans over given input relations, with knobs for which operators
  appear (:data:`OPERATORS`) and which scalar function families (:data:`SCALAR_FAMILIES`);
* :func:`update_streams` / :func:`input_streams` — ``(row, time, diff)`` insertions **and
  retractions** whose accumulation is a multiset (never negative) at every time;
* :func:`small_datums` / :func:`small_rows` — values from small domains so that joins match,
  groups collide and temporal bounds fall inside the times tested (timestamps are a few
  milliseconds after 1970-01-01, some with sub-millisecond parts).

Generated plans never make ``Reduce``, ``TopK``, ``Window`` or ``Distinct`` see negative
multiplicities (``Negate`` only appears as ``x + Negate(Filter(x))`` or under ``Threshold``),
keep integers far from overflow, and use ``now()`` only in temporal filters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from hypothesis import strategies as st

from spate.frontier.antichain import Antichain
from spate.ids import GlobalId
from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    ColumnRef,
    Literal,
    Now,
    ScalarExpr,
)
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import (
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    FlatMap,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
)
from spate.plan.table_func import TableFunc
from spate.plan.window import (
    DEFAULT_FRAME,
    Window,
    WindowExpr,
    WindowFunc,
    range_between,
    rows_between,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import (
    BOOL,
    INT64,
    TEXT,
    TIMESTAMP,
    ScalarKind,
)
from spate.testing._scalar_strategies import COMPARISONS, ScalarExprs
from spate.testing.update_strategies import (
    input_streams as input_streams,
)
from spate.testing.update_strategies import (
    small_datums as small_datums,
)
from spate.testing.update_strategies import (
    small_rows as small_rows,
)
from spate.testing.update_strategies import (
    update_streams as update_streams,
)

K = ScalarKind

OPERATORS: Final = frozenset(
    {
        "constant",
        "map",
        "filter",
        "temporal_filter",
        "project",
        "flat_map",
        "join",
        "reduce",
        "top_k",
        "distinct",
        "negate",
        "threshold",
        "union",
        "arrange_by",
        "window",
    }
)
"""Operator knobs of :func:`plans` (``Get`` is always possible)."""

SCALAR_FAMILIES: Final = frozenset(
    {"arith", "div", "compare", "logic", "null", "case", "string", "time", "cast"}
)
"""Scalar function families of :func:`plans`; columns and literals are always possible."""


# --- relational plans ------------------------------------------------------------------------

_FRAMES = (
    DEFAULT_FRAME,
    DEFAULT_FRAME,
    rows_between(None, 0),
    rows_between(-1, 1),
    rows_between(0, None),
    rows_between(1, 2),
    rows_between(-2, -1),
    rows_between(2, 1),
    rows_between(None, None),
    range_between(0, None),
    range_between(0, 0),
    range_between(None, None),
)
"""Window frames drawn (the default twice as often): every kind of bound, empty frames."""


class _Plans:
    def __init__(
        self,
        inputs: Mapping[GlobalId, RelationDesc],
        operators: frozenset[str],
        families: frozenset[str],
        scalar_depth: int,
    ) -> None:
        unknown = operators - OPERATORS
        if unknown:
            raise ValueError(f"unknown operators {sorted(unknown)}; known: {sorted(OPERATORS)}")
        if families - SCALAR_FAMILIES:
            raise ValueError(f"unknown scalar families {sorted(families - SCALAR_FAMILIES)}")
        if not inputs:
            raise ValueError("plans() needs at least one input relation")
        self.inputs = dict(inputs)
        self.operators = operators
        self.families = families
        self.scalar_depth = scalar_depth
        self._cache: dict[tuple[int, bool], st.SearchStrategy[RelationExpr]] = {}

    def scalars(self, desc: RelationDesc) -> ScalarExprs:
        return ScalarExprs(desc, self.families)

    def leaf(self) -> st.SearchStrategy[RelationExpr]:
        gets = st.sampled_from(sorted(self.inputs, key=str)).map(
            lambda id: Get(id, self.inputs[id])
        )
        if "constant" not in self.operators:
            return gets
        first = next(iter(self.inputs.values()))
        constant = st.lists(
            st.tuples(small_rows(first), st.integers(1, 2)), min_size=0, max_size=3
        ).map(lambda rows: Constant(tuple(rows), first))
        return st.one_of(gets, gets, constant)

    def plan(self, depth: int, *, top: bool = False) -> st.SearchStrategy[RelationExpr]:
        key = (depth, top)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._plan(depth, top=top)
        return found

    def _plan(self, depth: int, *, top: bool) -> st.SearchStrategy[RelationExpr]:
        if depth <= 0 or not self.operators - {"constant"}:
            return self.leaf()
        if top:
            return self.composite(depth)
        return st.one_of(self.leaf(), self.composite(depth), self.composite(depth))

    def composite(self, depth: int) -> st.SearchStrategy[RelationExpr]:
        ops = sorted(self.operators - {"constant"})
        child = self.plan(depth - 1)
        return st.one_of(*(self.operator(op, child) for op in ops))

    def operator(
        self, op: str, child: st.SearchStrategy[RelationExpr]
    ) -> st.SearchStrategy[RelationExpr]:
        method: _Build = getattr(self, "_" + op)

        @st.composite
        def build(draw: st.DrawFn) -> RelationExpr:
            return method(draw, child)

        return build()

    # One method per operator knob: draw the inputs from ``child``, return the node.

    def _map(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        sc = self.scalars(c.desc)
        kind = draw(st.sampled_from(sc.kinds()))
        return Map(c, (draw(sc.expr(kind, self.scalar_depth)),))

    def _filter(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        predicate = self.scalars(c.desc).expr(K.BOOL, self.scalar_depth)
        return Filter(c, tuple(draw(st.lists(predicate, min_size=1, max_size=2))))

    def _temporal_filter(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        choices: list[tuple[Now, ScalarExpr]] = []
        for i, col in enumerate(c.desc.columns):
            shift = Literal(draw(st.integers(0, 4)), INT64)
            if col.type.kind is K.INT64:
                choices.append((Now(INT64), CallBinary(BinaryFunc.ADD, ColumnRef(i), shift)))
            elif col.type.kind is K.TIMESTAMP:
                stamp = CallBinary(BinaryFunc.TIMESTAMP_ADD_MS, ColumnRef(i), shift)
                choices.append((Now(TIMESTAMP), stamp))
        if not choices:
            choices.append((Now(INT64), Literal(draw(st.integers(0, 8)), INT64)))
        preds: list[ScalarExpr] = []
        for _ in range(draw(st.integers(1, 2))):
            now, bound = draw(st.sampled_from(choices))
            op = draw(st.sampled_from(sorted(COMPARISONS - {BinaryFunc.NE})))
            preds.append(
                CallBinary(op, bound, now) if draw(st.booleans()) else CallBinary(op, now, bound)
            )
        return Filter(c, tuple(preds))

    def _project(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        cols = draw(st.permutations(range(c.desc.arity)))
        return Project(c, tuple(cols[: draw(st.integers(1, c.desc.arity))]))

    def _flat_map(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        sc = self.scalars(c.desc)
        texts = sc.columns_of(K.TEXT)
        options = ["generate_series", "unnest"] + (["string_to_table"] if texts else [])
        func = TableFunc(draw(st.sampled_from(options)))
        if func is TableFunc.GENERATE_SERIES:
            stop = draw(sc.expr(K.INT64, 0))
            args: tuple[ScalarExpr, ...] = (Literal(draw(st.integers(-1, 2)), INT64), stop)
            if draw(st.booleans()):
                args = (*args, Literal(draw(st.sampled_from([-1, 1, 2])), INT64))
        elif func is TableFunc.UNNEST:
            kind = draw(st.sampled_from(sc.kinds()))
            args = tuple(draw(st.lists(sc.expr(kind, 0), min_size=1, max_size=3)))
        else:
            args = (ColumnRef(draw(st.sampled_from(texts))), Literal(",", TEXT))
        return FlatMap(c, func, args)

    def _join(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        operands = [draw(child) for _ in range(draw(st.sampled_from([2, 2, 2, 3])))]
        columns: list[tuple[int, int, ScalarKind]] = []  # (position, input, kind)
        for k, o in enumerate(operands):
            columns.extend((len(columns), k, c.type.kind) for c in o.desc.columns)
        pairs = [
            (a, b)
            for a, ia, ka in columns
            for b, ib, kb in columns
            if ia < ib and ka is kb and ka is not K.JSONB
        ]
        classes: list[tuple[int, int]] = []
        if pairs:
            # Usually an equi-join; a cross join only sometimes (they grow fast).
            count = draw(st.sampled_from([1, 1, 1, 2, 0]))
            classes = draw(st.lists(st.sampled_from(pairs), min_size=count, max_size=count))
        join = Join(tuple(operands), tuple(classes))
        if draw(st.integers(0, 3)) == 0:
            pred = draw(self.scalars(join.desc).expr(K.BOOL, 1))
            join = Join(tuple(operands), tuple(classes), (pred,))
        return join

    def _reduce(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        key = draw(st.lists(st.sampled_from(range(c.desc.arity)), max_size=2, unique=True))
        options: list[AggregateExpr] = [AggregateExpr(AggregateFunc.COUNT, Literal(True, BOOL))]
        for i, col in enumerate(c.desc.columns):
            ref, k = ColumnRef(i), col.type.kind
            options.append(AggregateExpr(AggregateFunc.COUNT, ref, draw(st.booleans())))
            if k is not K.JSONB:
                options.append(AggregateExpr(AggregateFunc.MIN, ref))
                options.append(AggregateExpr(AggregateFunc.MAX, ref))
            if k is K.INT64:
                options.append(AggregateExpr(AggregateFunc.SUM, ref, draw(st.booleans())))
                options.append(AggregateExpr(AggregateFunc.AVG, ref))
            if k is K.BOOL:
                options.append(AggregateExpr(AggregateFunc.BOOL_AND, ref))
                options.append(AggregateExpr(AggregateFunc.BOOL_OR, ref))
            if k is K.TEXT:
                options.append(AggregateExpr(AggregateFunc.STRING_AGG, ref, delimiter="|"))
        aggs = draw(st.lists(st.sampled_from(options), min_size=0 if key else 1, max_size=3))
        return Reduce(c, tuple(key), tuple(aggs))

    def _top_k(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        key = draw(st.lists(st.sampled_from(range(c.desc.arity)), max_size=1, unique=True))
        orderable = [i for i, col in enumerate(c.desc.columns) if col.type.kind is not K.JSONB]
        order: list[ColumnOrder] = []
        if orderable:
            one = st.builds(
                ColumnOrder,
                st.sampled_from(orderable),
                st.booleans(),
                st.sampled_from([None, True, False]),
            )
            order = draw(st.lists(one, max_size=2))
        limit = draw(st.sampled_from([None, 0, 1, 1, 2, 3]))
        offset = draw(st.sampled_from([0, 0, 1, 2]))
        return TopK(c, tuple(key), tuple(order), limit, offset)

    def _window(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        cols = c.desc.columns
        key = draw(st.lists(st.sampled_from(range(c.desc.arity)), max_size=2, unique=True))
        orderable = [i for i, col in enumerate(cols) if col.type.kind is not K.JSONB]
        order: list[ColumnOrder] = []
        if orderable:
            one = st.builds(
                ColumnOrder,
                st.sampled_from(orderable),
                st.booleans(),
                st.sampled_from([None, True, False]),
            )
            order = draw(st.lists(one, max_size=2))
        options: list[WindowExpr | AggregateExpr] = [
            WindowExpr(WindowFunc.ROW_NUMBER),
            WindowExpr(WindowFunc.RANK),
            WindowExpr(WindowFunc.DENSE_RANK),
            WindowExpr(WindowFunc.PERCENT_RANK),
            WindowExpr(WindowFunc.CUME_DIST),
            WindowExpr(WindowFunc.NTILE, offset=draw(st.integers(1, 4))),
            AggregateExpr(AggregateFunc.COUNT, Literal(True, BOOL)),
        ]
        for i, col in enumerate(cols):
            ref, k = ColumnRef(i), col.type.kind
            value = draw(st.sampled_from([WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE]))
            options.append(WindowExpr(value, ref))
            options.append(WindowExpr(WindowFunc.NTH_VALUE, ref, draw(st.integers(1, 3))))
            same = [ColumnRef(j) for j, o in enumerate(cols) if o.type == col.type]
            default = draw(st.sampled_from([None, *same]))
            offset = draw(st.sampled_from([1, 1, 2, 0, -1]))
            func = draw(st.sampled_from([WindowFunc.LAG, WindowFunc.LEAD]))
            options.append(WindowExpr(func, ref, offset, default))
            options.append(AggregateExpr(AggregateFunc.COUNT, ref))
            if k is not K.JSONB:
                options.append(AggregateExpr(AggregateFunc.MIN, ref))
                options.append(AggregateExpr(AggregateFunc.MAX, ref))
            if k is K.INT64:
                options.append(AggregateExpr(AggregateFunc.SUM, ref))
                options.append(AggregateExpr(AggregateFunc.AVG, ref))
            if k is K.BOOL:
                options.append(AggregateExpr(AggregateFunc.BOOL_AND, ref))
                options.append(AggregateExpr(AggregateFunc.BOOL_OR, ref))
            if k is K.TEXT:
                options.append(AggregateExpr(AggregateFunc.STRING_AGG, ref, delimiter=","))
        funcs = draw(st.lists(st.sampled_from(options), min_size=1, max_size=3))
        # each function its own frame: functions of different frames share one ordering
        frames = tuple(draw(st.sampled_from(_FRAMES)) for _ in funcs)
        return Window(c, tuple(key), tuple(order), tuple(funcs), frames=frames)

    def _distinct(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        return Distinct(draw(child))

    def _threshold(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        return Threshold(draw(child))

    def _arrange_by(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        key = draw(
            st.lists(st.sampled_from(range(c.desc.arity)), min_size=1, max_size=2, unique=True)
        )
        return ArrangeBy(c, (tuple(key),))

    def _negate(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        predicate = self.scalars(c.desc).expr(K.BOOL, 1)
        if draw(st.booleans()):
            # c − (the rows of c where p): never negative.
            return Union((c, Negate(Filter(c, (draw(predicate),)))))
        p, q = draw(predicate), draw(predicate)
        return Threshold(Union((Filter(c, (p,)), Negate(Filter(c, (q,))))))

    def _union(self, draw: st.DrawFn, child: _Child) -> RelationExpr:
        c = draw(child)
        others: list[RelationExpr] = [c, Distinct(c)]
        if "filter" in self.operators:
            others.append(Filter(c, (draw(self.scalars(c.desc).expr(K.BOOL, 1)),)))
        others.extend(Get(id, d) for id, d in self.inputs.items() if d.types == c.desc.types)
        return Union((c, *draw(st.lists(st.sampled_from(others), min_size=1, max_size=2))))


_Child = st.SearchStrategy[RelationExpr]
_Build = Callable[[st.DrawFn, _Child], RelationExpr]


def plans(
    inputs: Mapping[GlobalId, RelationDesc],
    *,
    operators: frozenset[str] | Sequence[str] = OPERATORS,
    scalar_families: frozenset[str] | Sequence[str] = SCALAR_FAMILIES,
    max_depth: int = 3,
    scalar_depth: int = 2,
) -> st.SearchStrategy[RelationExpr]:
    """Random well-typed plans reading ``inputs`` (collection id → desc).

    ``operators`` picks the operator knobs (:data:`OPERATORS`; ``Get`` is always there),
    ``scalar_families`` the scalar function families (:data:`SCALAR_FAMILIES`), ``max_depth``
    the relational nesting and ``scalar_depth`` the expression nesting.
    """
    key = (
        tuple(sorted(inputs.items(), key=lambda kv: str(kv[0]))),
        frozenset(operators),
        frozenset(scalar_families),
        scalar_depth,
    )
    gen = _PLANS_CACHE.get(key)
    if gen is None:
        gen = _PLANS_CACHE[key] = _Plans(inputs, key[1], key[2], scalar_depth)
    return gen.plan(max_depth, top=True)


_PLANS_CACHE: dict[
    tuple[tuple[tuple[GlobalId, RelationDesc], ...], frozenset[str], frozenset[str], int], _Plans
] = {}


BUILD_ID: Final = GlobalId.user(1000)
INDEX_ID: Final = GlobalId.user(1001)
SUBSCRIBE_ID: Final = GlobalId.transient(1000)


def single_plan_dataflow(
    plan: RelationExpr,
    inputs: Mapping[GlobalId, RelationDesc],
    *,
    as_of: int = 0,
    until: int | None = None,
    build_id: GlobalId = BUILD_ID,
    index_id: GlobalId = INDEX_ID,
    subscribe_id: GlobalId | None = SUBSCRIBE_ID,
) -> DataflowDescription:
    """A dataflow that imports ``inputs``, builds ``plan`` as ``build_id``, exports it as an
    index on all its columns, and (unless ``subscribe_id`` is None) as a subscribe."""
    used = plan.depends_on()
    sinks: tuple[SinkExport, ...] = ()
    if subscribe_id is not None:
        sinks = (SinkExport(subscribe_id, build_id, plan.desc, SubscribeConnection()),)
    return DataflowDescription(
        source_imports=tuple(SourceImport(id, d) for id, d in inputs.items() if id in used),
        objects_to_build=(BuildDesc(build_id, plan),),
        index_exports=(
            IndexExport(index_id, IndexDesc(build_id, tuple(range(plan.desc.arity))), plan.desc),
        ),
        sink_exports=sinks,
        as_of=Antichain.of(as_of),
        until=Antichain.empty() if until is None else Antichain.of(until),
        debug_name="single_plan",
    )
