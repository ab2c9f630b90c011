"""A plan evaluated over Arrow tables with ``pyarrow.compute``: :func:`evaluate_arrow`.

The same results as :func:`spate.plan.evaluation.relation.evaluate` (which defines them), for
the part of the plan language whose semantics Arrow's kernels reproduce exactly, column at a
time instead of row at a time. Everything else is :class:`Unsupported`, found before any work
(:func:`compile_plan`) or, for what depends on the data (an ``int64`` overflow, which the row
evaluator reports as an error naming the row), while evaluating: the caller then evaluates the
plan with the row evaluator, which gives the exact answer or error.

What is covered:

* ``Get``, ``Filter``, ``Map``, ``Project``, ``Distinct``, ``Join`` (equivalences of columns,
  residual predicates; NULL keys match nothing), ``Reduce`` (non-DISTINCT ``count``, ``sum``
  of ``int64`` — also as ``numeric(p, 0)`` through a cast —, ``min``/``max``);
* inputs whose columns are ``bool``, ``int64``, ``text``, ``bytes``, ``date``, ``timestamp``
  or ``numeric`` (floats are not: their NaN and ``-0.0`` rules differ from Arrow's);
* scalars: columns, literals, comparisons of ``int64``/``text``/``bool``/``date`` values
  (text by code point: Arrow compares UTF-8 bytewise, the same order), ``AND``/``OR``
  (three-valued), ``NOT``, ``IS NULL``, ``coalesce``, ``int64`` ``+ - *`` and negation
  (overflow: the row evaluator's error), ``CAST(int64 AS numeric(p, 0))`` with ``p >= 19``.

A relation here is a table whose columns are the plan's, by position, then ``_n``, each row's
multiplicity (positive; never consolidated: nothing covered needs it). Grouping keys, join keys
and ``Distinct``'s columns are of the comparable types above (Arrow hashes them as the row
evaluator compares them).

A subplan that occurs more than once in a plan (a decorrelated subquery reads its outer
relation again; a scalar subquery's guard repeats the subquery) is evaluated once per
evaluation. Tables of at most :data:`SMALL_ROWS` rows are joined, deduplicated and consolidated
with Python dicts over their values instead of by Acero, whose fixed cost per call (planning,
threads) is tens of times the dicts' work on them; the results are the same rows (keys of the
comparable types above compare in Python as in Arrow; NULL join keys match nothing).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.ids import GlobalId
from spate.plan.aggregate import AggregateFunc
from spate.plan.errors import EvalError
from spate.plan.evaluation.relation import TooLarge
from spate.plan.evaluation.values import canonical, canonical_row, fit_numeric
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from spate.plan.numeric_division import divide
from spate.plan.relation import (
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Union,
)
from spate.repr.arrow import arrow_type, data_schema
from spate.repr.desc import RelationDesc
from spate.repr.types import FLOAT64, Row, ScalarKind, ScalarType, numeric

__all__ = [
    "MULTIPLICITY",
    "CompiledPlan",
    "Unsupported",
    "compile_plan",
    "evaluate_arrow",
    "input_table",
    "supported_input",
]

MULTIPLICITY: Final = "_n"
"""The column of a relation's table holding each row's multiplicity."""

K = ScalarKind
_INPUT_KINDS: Final = frozenset({K.BOOL, K.INT64, K.TEXT, K.BYTES, K.DATE, K.TIMESTAMP, K.NUMERIC})
_COMPARABLE: Final = frozenset({K.BOOL, K.INT64, K.TEXT, K.DATE})
"""Types whose values Arrow compares and hashes as the row evaluator does (keys, ``=``)."""
_ORDERED: Final = _COMPARABLE | {K.NUMERIC}
"""Types Arrow compares as the row evaluator does (decimals by value, whatever the scales)."""
_INT64_MAX: Final = 2**63 - 1
SMALL_ROWS: Final = 4096
"""Tables up to this many rows are joined, deduplicated and consolidated by dicts (module docs)."""


class Unsupported(Exception):
    """The plan (or, found while evaluating, its data) is not one this module evaluates
    exactly: evaluate it with the row evaluator."""


Relation = pa.Table
_Scalar = Callable[[pa.Table], pa.Array | pa.ChunkedArray | pa.Scalar]
"""A compiled scalar: its values over a relation's table (or :class:`_Columns`)."""
_Node = Callable[[Mapping[GlobalId, pa.Table]], pa.Table]
CompiledPlan = _Node
"""A plan compiled by :func:`compile_plan`: its contents as a function of the inputs."""


def supported_input(desc: RelationDesc) -> bool:
    """Whether a collection of ``desc`` can be an input here."""
    return all(c.type.kind in _INPUT_KINDS for c in desc.columns)


def evaluate_arrow(
    plan: RelationExpr,
    inputs: Mapping[GlobalId, pa.Table],
    *,
    max_rows: int | None = None,
    compiled: _Node | None = None,
) -> pa.Table:
    """``plan`` on ``inputs`` (each a table of the ``Get``'s columns by position then
    :data:`MULTIPLICITY`, positive), as a table of ``data_schema(plan.desc)`` with each row
    repeated as often as its multiplicity. :class:`Unsupported` (before any work when the plan
    is; else when the data are); :class:`TooLarge` when a join would pair more than
    ``max_rows`` rows."""
    if plan.desc.arity == 0:
        raise Unsupported("a result without columns")
    node = compiled if compiled is not None else compile_plan(plan, max_rows)
    out = node(_Run(inputs))
    counts = out.column(MULTIPLICITY).to_numpy()
    if (counts < 1).any():
        out = _consolidate(out)
        counts = out.column(MULTIPLICITY).to_numpy()
        if (counts < 0).any():
            raise Unsupported("a negative multiplicity")  # the row evaluator's read says so
    data = out.drop_columns([MULTIPLICITY])
    if not (counts == 1).all():
        data = data.take(pa.array(np.repeat(np.arange(len(counts)), counts)))
    return pa.Table.from_arrays(data.columns, schema=data_schema(plan.desc))


def input_table(desc: RelationDesc, contents: Mapping[Row, int]) -> pa.Table:
    """The contents of a collection of ``desc`` (rows of canonical datums, each with its
    multiplicity) as an input of :func:`evaluate_arrow`."""
    rows = [r for r, n in contents.items() if n != 0]
    arrays = [
        pa.array([r[i] for r in rows], type=arrow_type(c.type)) for i, c in enumerate(desc.columns)
    ]
    counts = pa.array([n for n in contents.values() if n != 0], type=pa.int64())
    return pa.Table.from_arrays([*arrays, counts], names=[*_names(desc.arity), MULTIPLICITY])


def compile_plan(plan: RelationExpr, max_rows: int | None = None) -> _Node:
    """A function of the inputs computing ``plan`` (module docs); :class:`Unsupported` when
    the plan is not covered."""
    return _Compiler(max_rows, _repeated(plan)).node(plan)


class _Run(dict[GlobalId, pa.Table]):
    """The inputs of one evaluation, and the results of its repeated subplans so far."""

    __slots__ = ("shared",)

    def __init__(self, inputs: Mapping[GlobalId, pa.Table]) -> None:
        super().__init__(inputs)
        self.shared: dict[object, pa.Table] = {}


def _repeated(plan: RelationExpr) -> dict[int, int]:
    """The subplans of ``plan`` that occur more than once in it (by equality), other than
    inputs and constants (nothing to save): each such node's ``id`` mapped to its subplan's
    number, the same for equal subplans; none when the plan is not hashable.

    Each node is numbered once, bottom-up, by its own fields and its inputs' numbers: hashing
    the nodes themselves hashes each one's whole subtree (dataclass hashes are not cached), so
    counting a deep plan's nodes by hash cost time quadratic in its depth (a WHERE of a few
    hundred terms, one Filter over another: most of a small read's time)."""
    number: dict[int, int] = {}  # id(node) -> the number of its subplan
    numbers: dict[tuple[object, ...], int] = {}
    count: Counter[int] = Counter()
    nodes: dict[int, RelationExpr] = {}
    stack: list[tuple[RelationExpr, bool]] = [(plan, False)]
    try:
        while stack:
            node, ready = stack.pop()
            if id(node) in number:
                count[number[id(node)]] += 1
                continue
            children = node.inputs()
            if not ready:
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(children))
                continue
            key = (type(node), _own_fields(node), tuple(number[id(c)] for c in children))
            n = numbers.setdefault(key, len(numbers))
            number[id(node)] = n
            nodes[id(node)] = node
            count[n] += 1
    except TypeError:  # a plan holding something unhashable
        return {}
    return {
        i: n
        for i, n in number.items()
        if count[n] > 1 and not isinstance(nodes[i], (Get, Constant))
    }


def _own_fields(node: RelationExpr) -> tuple[object, ...]:
    """``node``'s fields other than its inputs."""
    out: list[object] = []
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        v = getattr(node, f.name)
        if isinstance(v, RelationExpr):
            continue
        if isinstance(v, tuple) and v and all(isinstance(x, RelationExpr) for x in v):
            continue
        out.append(v)
    return tuple(out)


class _Columns:
    """Columns by position: all of a relation a compiled scalar reads (``column(i)``), made
    without building a table."""

    __slots__ = ("_columns",)

    def __init__(self, columns: Sequence[pa.Array | pa.ChunkedArray]) -> None:
        self._columns = columns

    def column(self, i: int) -> pa.Array | pa.ChunkedArray:
        return self._columns[i]


def _shared(fn: _Node) -> _Node:
    """``fn`` evaluated at most once per evaluation (:class:`_Run`)."""
    token = object()

    def shared(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
        if not isinstance(inputs, _Run):
            return fn(inputs)
        found = inputs.shared.get(token)
        if found is None:
            found = inputs.shared[token] = fn(inputs)
        return found

    return shared


def _consolidate(table: pa.Table) -> pa.Table:
    """Equal rows as one, with the sum of their multiplicities; rows summing to 0 dropped."""
    arity = table.num_columns - 1
    if arity == 0:
        total = pc.sum(table.column(MULTIPLICITY)).as_py() or 0
        return pa.table({MULTIPLICITY: pa.array([total] if total else [], pa.int64())})
    if table.num_rows <= SMALL_ROWS:
        first: dict[object, int] = {}
        sums: dict[object, int] = {}
        counts_in = table.column(MULTIPLICITY).to_pylist()
        for i, row in enumerate(_key_values(table.columns[:arity])):
            if row in sums:
                sums[row] += counts_in[i]
            else:
                first[row], sums[row] = i, counts_in[i]
        kept = [row for row, n in sums.items() if n != 0]
        picked = table.take(pa.array([first[row] for row in kept], pa.int64()))
        try:
            totals = pa.array([sums[row] for row in kept], pa.int64())
        except (OverflowError, pa.ArrowInvalid):  # beyond int64: the row evaluator's error
            raise Unsupported("a multiplicity beyond int64") from None
        return _with(picked.columns[:arity], pa.chunked_array([totals]))
    names = _names(arity)
    summed = table.group_by(names, use_threads=False).aggregate([(MULTIPLICITY, "sum")])
    counts = summed.column(f"{MULTIPLICITY}_sum")
    out = _with([summed.column(n) for n in names], counts)
    return out.filter(pc.not_equal(counts, 0))


def _nonnegative(table: pa.Table) -> pa.Table:
    """``table`` consolidated when it has a non-positive multiplicity; :class:`Unsupported`
    (the row evaluator's error) when a row's stays negative."""
    counts = table.column(MULTIPLICITY)
    if table.num_rows and pc.min(counts).as_py() < 1:
        table = _consolidate(table)
        if table.num_rows and pc.min(table.column(MULTIPLICITY)).as_py() < 0:
            raise Unsupported("a negative multiplicity")
    return table


def _names(n: int) -> list[str]:
    return [str(i) for i in range(n)]


def _with(arrays: Sequence[pa.Array | pa.ChunkedArray], counts: pa.ChunkedArray) -> pa.Table:
    return pa.Table.from_arrays([*arrays, counts], names=[*_names(len(arrays)), MULTIPLICITY])


class _Compiler:
    def __init__(self, max_rows: int | None, repeated: dict[int, int]) -> None:
        self.max_rows = max_rows
        self.repeated = repeated  # see _repeated
        self.shared: dict[int, _Node] = {}

    def node(self, plan: RelationExpr) -> _Node:
        n = self.repeated.get(id(plan))
        if n is None:
            return self._node(plan)
        found = self.shared.get(n)
        if found is None:
            found = self.shared[n] = _shared(self._node(plan))
        return found

    def _node(self, plan: RelationExpr) -> _Node:
        match plan:
            case Get(id, desc):
                if not supported_input(desc):
                    raise Unsupported(f"input column types of {id}")
                arity = desc.arity

                def get(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
                    table = inputs[id]
                    return _with(table.columns[:arity], table.column(arity))

                return get
            case ArrangeBy(inp, _):
                return self.node(inp)
            case Filter(inp, predicates):
                below = self.node(inp)
                keep = [_scalar(p, inp.desc) for p in predicates]
                for p in predicates:
                    if _type(p, inp.desc).kind is not K.BOOL:
                        raise Unsupported("a predicate that is not bool")

                def filter_(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
                    table = below(inputs)
                    for predicate in keep:
                        table = _keep(table, predicate)
                    return table

                return filter_
            case Map(inp, scalars, _):
                below = self.node(inp)
                arity = inp.desc.arity
                columns = plan.desc.columns
                compiled = []
                for i, s in enumerate(scalars):
                    scope = RelationDesc(columns[: arity + i])
                    compiled.append((_scalar(s, scope), arrow_type(columns[arity + i].type)))

                def map_(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
                    table = below(inputs)
                    counts = table.column(MULTIPLICITY)
                    values = list(table.columns[:-1])
                    for fn, t in compiled:  # a scalar reads columns by position only
                        values.append(_column(fn(_Columns(values)), t, table.num_rows))
                    return _with(values, counts)

                return map_
            case Project(inp, outputs, _):
                below = self.node(inp)

                def project(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
                    table = below(inputs)
                    return _with([table.column(i) for i in outputs], table.column(MULTIPLICITY))

                return project
            case Constant(rows, desc):
                if not supported_input(desc):
                    raise Unsupported("constant column types")
                contents: Counter[Row] = Counter()
                for row, n in rows:
                    contents[canonical_row(tuple(row), desc.columns)] += n
                constant = input_table(desc, contents)
                return lambda inputs: constant
            case Negate(inp):
                below = self.node(inp)

                def negate(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
                    table = below(inputs)
                    counts = _checked(pc.negate_checked, table.column(MULTIPLICITY))
                    return _with(table.columns[:-1], counts)

                return negate
            case Union(operands):
                parts = [self.node(o) for o in operands]
                types = [arrow_type(c.type) for c in plan.desc.columns]

                def union(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
                    tables = []
                    for part in parts:
                        table = part(inputs)
                        columns = [
                            c if c.type == t else pc.cast(c, t)
                            for c, t in zip(table.columns[:-1], types, strict=True)
                        ]
                        tables.append(_with(columns, table.column(MULTIPLICITY)))
                    return _consolidate(pa.concat_tables(tables))

                return union
            case Distinct(inp):
                _check_keys(inp.desc, range(inp.desc.arity))
                below = self.node(inp)

                def distinct(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
                    table = _nonnegative(below(inputs))
                    arity = table.num_columns - 1
                    if arity == 0:
                        n = 1 if table.num_rows else 0
                        return pa.table({MULTIPLICITY: pa.array([1] * n, pa.int64())})
                    if table.num_rows <= SMALL_ROWS:
                        first: dict[object, int] = {}
                        for i, row in enumerate(_key_values(table.columns[:arity])):
                            first.setdefault(row, i)
                        picked = table.take(pa.array(list(first.values()), pa.int64()))
                        ones = pa.chunked_array([pa.array(np.ones(len(first), np.int64))])
                        return _with(picked.columns[:arity], ones)
                    names = _names(arity)
                    grouped = table.group_by(names, use_threads=False).aggregate([])
                    ones = pa.chunked_array([pa.array(np.ones(grouped.num_rows, np.int64))])
                    return _with([grouped.column(n) for n in names], ones)

                return distinct
            case Join():
                return self.join(plan)
            case Reduce():
                return self.reduce(plan)
        raise Unsupported(type(plan).__name__)

    def join(self, plan: Join) -> _Node:
        offsets = plan.input_offsets()
        operands = [self.node(o) for o in plan.operands]
        ends = [o + i.desc.arity for o, i in zip(offsets, plan.operands, strict=True)]
        columns = plan.desc.columns
        for cls in plan.equivalences:
            kinds = {columns[p].type.kind for p in cls}
            if len(kinds) != 1 or not kinds <= _COMPARABLE:
                raise Unsupported("join keys of these types")
        # the key pairs linking operand k to the ones before it
        links: list[list[tuple[int, int]]] = []
        for k in range(len(plan.operands)):
            linked = [
                cls
                for cls in plan.equivalences
                if offsets[k] <= max(cls) < ends[k] and min(cls) < offsets[k]
            ]
            links.append([(min(cls), min(p for p in cls if p >= offsets[k])) for cls in linked])
        residual = [_scalar(p, plan.desc) for p in plan.predicates]
        for p in plan.predicates:
            if _type(p, plan.desc).kind is not K.BOOL:
                raise Unsupported("a predicate that is not bool")
        full = [cls for cls in plan.equivalences if len(cls) > 1]
        max_rows = self.max_rows

        def join(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
            acc: pa.Table | None = None
            for k, operand in enumerate(operands):
                right = operand(inputs)
                arity = right.num_columns - 1
                right = right.rename_columns(
                    [*(f"c{offsets[k] + i}" for i in range(arity)), f"n{k}"]
                )
                if acc is None:
                    acc = right
                    continue
                pairs = links[k]
                if pairs and acc.num_rows <= SMALL_ROWS and right.num_rows <= SMALL_ROWS:
                    left_keys = [acc.column(f"c{a}") for a, _ in pairs]
                    right_keys = [right.column(f"c{b}") for _, b in pairs]
                    left_i, right_i = _matches(left_keys, right_keys, max_rows)
                    a, b = acc.take(left_i), right.take(right_i)
                    acc = pa.Table.from_arrays(
                        [*a.columns, *b.columns], names=[*a.column_names, *b.column_names]
                    )
                elif pairs:
                    if max_rows is not None:  # count the pairs before making them
                        left_keys = [f"c{a}" for a, _ in pairs]
                        right_keys = [f"c{b}" for _, b in pairs]
                        if _join_size(acc, left_keys, right, right_keys) > max_rows:
                            raise TooLarge("Join")
                    acc = acc.join(
                        right,
                        keys=[f"c{a}" for a, _ in pairs],
                        right_keys=[f"c{b}" for _, b in pairs],
                        join_type="inner",
                        coalesce_keys=False,
                        use_threads=False,
                    )
                else:
                    size = acc.num_rows * right.num_rows
                    if max_rows is not None and size > max_rows:
                        raise TooLarge("Join")
                    left_i = np.repeat(np.arange(acc.num_rows), right.num_rows)
                    right_i = np.tile(np.arange(right.num_rows), acc.num_rows)
                    a, b = acc.take(pa.array(left_i)), right.take(pa.array(right_i))
                    acc = pa.Table.from_arrays(
                        [*a.columns, *b.columns], names=[*a.column_names, *b.column_names]
                    )
            assert acc is not None
            counts = acc.column("n0")
            for k in range(1, len(operands)):
                counts = _checked(pc.multiply_checked, counts, acc.column(f"n{k}"))
            table = _with([acc.column(f"c{i}") for i in range(plan.desc.arity)], counts)
            for cls in full:  # every member equal (the linked pairs are; the rest are not yet)
                first = table.column(cls[0])
                for p in cls[1:]:
                    if table.num_rows:
                        mask = pc.equal(first, table.column(p))
                        table = table.filter(mask, null_selection_behavior="drop")
                        first = table.column(cls[0])
            for predicate in residual:
                table = _keep(table, predicate)
            return table

        return join

    def reduce(self, plan: Reduce) -> _Node:
        inp, key = plan.input, plan.group_key
        below = self.node(inp)
        _check_keys(inp.desc, key)
        out_types = [c.type for c in plan.desc.columns[len(key) :]]
        specs: list[tuple[str, _Scalar | None, pa.DataType]] = []
        for agg, t in zip(plan.aggregates, out_types, strict=True):
            if agg.distinct:
                raise Unsupported("DISTINCT aggregates")
            if agg.func is AggregateFunc.COUNT:
                star = agg.is_count_star()
                specs.append(("count", None if star else _scalar(agg.expr, inp.desc), pa.int64()))
            elif agg.func is AggregateFunc.SUM:
                inner = agg.expr
                if isinstance(inner, Cast) and _int_to_numeric(inner, inp.desc):
                    inner = inner.expr
                if _type(inner, inp.desc).kind is not K.INT64 or t.kind not in (K.INT64, K.NUMERIC):
                    raise Unsupported("sum of this type")
                if t.kind is K.NUMERIC and t.scale != 0:
                    raise Unsupported("sum of this type")
                specs.append(("sum", _scalar(inner, inp.desc), arrow_type(t)))
            elif agg.func is AggregateFunc.AVG:
                inner = agg.expr
                if isinstance(inner, Cast) and _int_to_numeric(inner, inp.desc):
                    inner = inner.expr
                    if t.kind is not K.NUMERIC:
                        raise Unsupported("avg of this type")
                elif t.kind is not K.FLOAT64:
                    raise Unsupported("avg of this type")
                if _type(inner, inp.desc).kind is not K.INT64:
                    raise Unsupported("avg of this type")
                specs.append(("avg", _scalar(inner, inp.desc), arrow_type(t)))
            elif agg.func in (AggregateFunc.MIN, AggregateFunc.MAX):
                if _type(agg.expr, inp.desc).kind not in _COMPARABLE - {K.BOOL}:
                    raise Unsupported("min/max of this type")
                specs.append((agg.func.value, _scalar(agg.expr, inp.desc), arrow_type(t)))
            else:
                raise Unsupported(f"aggregate {agg.func.value}")

        def reduce(inputs: Mapping[GlobalId, pa.Table]) -> pa.Table:
            table = _nonnegative(below(inputs))
            if table.num_rows == 0:
                types = [arrow_type(c.type) for c in plan.desc.columns]
                empty = [pa.chunked_array([], type=t) for t in types]
                return _with(empty, pa.chunked_array([], type=pa.int64()))
            counts = table.column(MULTIPLICITY)
            columns: list[pa.Array | pa.ChunkedArray] = [table.column(i) for i in key]
            aggs: list[tuple[str, str, pa.compute.FunctionOptions | None]] = []
            for j, (func, fn, _t) in enumerate(specs):
                name = f"a{j}"
                if func == "count":
                    if fn is None:
                        values = counts
                    else:
                        v = _column(fn(table), pa.null(), table.num_rows)
                        values = pc.if_else(pc.is_null(v), 0, counts)
                    columns.append(values)
                    aggs.append((name, "sum", pc.ScalarAggregateOptions(min_count=0)))
                elif func in ("sum", "avg"):
                    assert fn is not None
                    v = _column(fn(table), pa.int64(), table.num_rows)
                    weighted = _checked(pc.multiply_checked, v, counts)
                    bound = pc.sum(pc.abs(pc.cast(weighted, pa.float64(), safe=False))).as_py()
                    if bound is not None and bound >= 2.0**62:  # a sum could overflow int64
                        raise Unsupported("a sum near the int64 range")
                    columns.append(weighted)
                    aggs.append((name, "sum", pc.ScalarAggregateOptions(min_count=1)))
                    if func == "avg":  # and the count of the values averaged
                        columns.append(pc.if_else(pc.is_null(v), 0, counts))
                        aggs.append((f"{name}n", "sum", pc.ScalarAggregateOptions(min_count=0)))
                else:
                    assert fn is not None
                    columns.append(_column(fn(table), pa.null(), table.num_rows))
                    aggs.append((name, func, pc.ScalarAggregateOptions(min_count=1)))
            names = [f"k{i}" for i in range(len(key))] + [a[0] for a in aggs]
            staged = pa.Table.from_arrays(columns, names=names)
            grouped = staged.group_by(names[: len(key)], use_threads=False).aggregate(
                [(a, f, o) for a, f, o in aggs]
            )
            out: list[pa.Array | pa.ChunkedArray] = [
                grouped.column(f"k{i}") for i in range(len(key))
            ]
            for j, (func, _fn, t) in enumerate(specs):
                found = grouped.column(
                    f"a{j}_{'max' if func == 'max' else 'min' if func == 'min' else 'sum'}"
                )
                if func == "avg":
                    out.append(_averages(found, grouped.column(f"a{j}n_sum"), t))
                else:
                    out.append(found if found.type == t else pc.cast(found, t))
            ones = pa.chunked_array([pa.array(np.ones(grouped.num_rows, np.int64))])
            return _with(out, ones)

        return reduce


def _key_values(columns: Sequence[pa.Array | pa.ChunkedArray]) -> list[object]:
    """Each row's values of ``columns`` as a Python value (one column) or tuple, equal
    exactly when Arrow's hashing groups them (the types are the comparable ones)."""
    values = [c.to_pylist() for c in columns]
    return values[0] if len(values) == 1 else list(zip(*values, strict=True))


def _matches(
    left: Sequence[pa.ChunkedArray], right: Sequence[pa.ChunkedArray], max_rows: int | None
) -> tuple[pa.Array, pa.Array]:
    """The positions of the row pairs of an inner join of two small tables on the key columns
    ``left`` = ``right`` (NULL keys match nothing), by a dict of the right side's keys;
    :class:`TooLarge` once there are more than ``max_rows`` pairs."""
    single = len(right) == 1  # keys are values, else tuples
    build: dict[object, list[int]] = {}
    for j, key in enumerate(_key_values(right)):
        if key is None if single else None in key:  # type: ignore[operator]
            continue  # a NULL key matches nothing
        build.setdefault(key, []).append(j)
    left_i: list[int] = []
    right_i: list[int] = []
    limit = max_rows if max_rows is not None else -1
    for i, key in enumerate(_key_values(left)):
        found = build.get(key)
        if found is None:
            continue
        if len(found) == 1:
            left_i.append(i)
            right_i.append(found[0])
        else:
            left_i.extend([i] * len(found))
            right_i.extend(found)
        if 0 <= limit < len(left_i):
            raise TooLarge("Join")
    return pa.array(left_i, pa.int64()), pa.array(right_i, pa.int64())


def _join_size(left: pa.Table, left_keys: list[str], right: pa.Table, right_keys: list[str]) -> int:
    """The number of rows an inner join of ``left`` and ``right`` on these keys makes (NULL
    keys match nothing), from the two sides' key counts."""
    if left.num_rows == 0 or right.num_rows == 0:
        return 0
    names = [f"k{i}" for i in range(len(left_keys))]

    def counts(table: pa.Table, keys: list[str], side: str) -> pa.Table:
        keyed = pa.Table.from_arrays([table.column(k) for k in keys], names=names)
        grouped = keyed.group_by(names, use_threads=False).aggregate([([], "count_all")])
        return grouped.rename_columns([*names, side])

    matched = counts(left, left_keys, "l").join(
        counts(right, right_keys, "r"), keys=names, join_type="inner", use_threads=False
    )
    if matched.num_rows == 0:
        return 0
    products = pc.multiply(
        pc.cast(matched.column("l"), pa.float64()), pc.cast(matched.column("r"), pa.float64())
    )
    return int(pc.sum(products).as_py() or 0)


def _averages(sums: pa.ChunkedArray, counts: pa.ChunkedArray, t: pa.DataType) -> pa.Array:
    """Each group's ``avg`` from its sum and count, computed as the row evaluator does
    (numeric: the exact quotient rounded to the type's scale; float: the sum divided)."""
    out: list[object] = []
    for total, n in zip(sums.to_pylist(), counts.to_pylist(), strict=True):
        if total is None or not n:
            out.append(None)
        elif pa.types.is_decimal(t):
            scale = t.scale
            quotient = divide(Decimal(total), Decimal(n), 0, 0, scale)
            try:
                out.append(fit_numeric(quotient, numeric(t.precision, scale), "avg"))
            except EvalError:
                raise Unsupported("an average out of range") from None
        else:
            out.append(canonical(total / n, FLOAT64))
    return pa.array(out, type=t)


def _keep(table: pa.Table, predicate: _Scalar) -> pa.Table:
    """The rows of ``table`` for which ``predicate`` is TRUE (not FALSE, not NULL)."""
    if table.num_rows == 0:
        return table
    mask = predicate(table)
    if isinstance(mask, pa.Scalar):
        return table if mask.as_py() is True else table.slice(0, 0)
    return table.filter(mask, null_selection_behavior="drop")


def _check_keys(desc: RelationDesc, key: Sequence[int] | range) -> None:
    for i in key:
        if desc.columns[i].type.kind not in _COMPARABLE:
            raise Unsupported("keys of this type")


def _checked(
    fn: Callable[..., pa.Array | pa.ChunkedArray], *args: object
) -> pa.Array | pa.ChunkedArray:
    try:
        return fn(*args)
    except pa.ArrowInvalid:  # overflow: the row evaluator reports it, naming the row
        raise Unsupported("int64 overflow") from None


def _column(
    value: pa.Array | pa.ChunkedArray | pa.Scalar, t: pa.DataType, n: int
) -> pa.Array | pa.ChunkedArray:
    if isinstance(value, pa.Scalar):
        typ = value.type if t == pa.null() else t
        return pa.array([value.as_py()] * n, type=typ)
    return value


def _int_to_numeric(cast: Cast, desc: RelationDesc) -> bool:
    t = cast.type
    return (
        t.kind is K.NUMERIC
        and t.scale == 0
        and (t.precision or 0) >= 19
        and _type(cast.expr, desc).kind is K.INT64
    )


def _type(expr: ScalarExpr, desc: RelationDesc) -> ScalarType:
    from spate.plan.infer import typ

    return typ(expr, desc.columns).type


_COMPARE: Final = {
    BinaryFunc.EQ: pc.equal,
    BinaryFunc.NE: pc.not_equal,
    BinaryFunc.LT: pc.less,
    BinaryFunc.LE: pc.less_equal,
    BinaryFunc.GT: pc.greater,
    BinaryFunc.GE: pc.greater_equal,
}
_ARITH: Final = {
    BinaryFunc.ADD: pc.add_checked,
    BinaryFunc.SUB: pc.subtract_checked,
    BinaryFunc.MUL: pc.multiply_checked,
}


def _scalar(expr: ScalarExpr, desc: RelationDesc) -> _Scalar:
    """``expr`` over the columns of ``desc`` as a function of a relation's table."""
    match expr:
        case ColumnRef(index):
            if desc.columns[index].type.kind not in _INPUT_KINDS:
                raise Unsupported("a column of this type")
            return lambda t: t.column(index)
        case Literal(value, ltype):
            if ltype.kind not in _ORDERED:
                raise Unsupported("a literal of this type")
            s = pa.scalar(value, type=arrow_type(ltype))
            return lambda t: s
        case CallBinary(func, left, right) if func in _COMPARE:
            kind = _type(left, desc).kind
            if kind not in _ORDERED or _type(right, desc).kind is not kind:
                raise Unsupported("a comparison of these types")
            op, lf, rf = _COMPARE[func], _scalar(left, desc), _scalar(right, desc)
            return lambda t: op(lf(t), rf(t))
        case CallBinary(func, left, right) if func in (BinaryFunc.AND, BinaryFunc.OR):
            op = pc.and_kleene if func is BinaryFunc.AND else pc.or_kleene
            lf, rf = _scalar(left, desc), _scalar(right, desc)
            return lambda t: op(lf(t), rf(t))
        case CallBinary(func, left, right) if func in _ARITH:
            if _type(left, desc).kind is not K.INT64 or _type(right, desc).kind is not K.INT64:
                raise Unsupported("arithmetic on these types")
            arith, lf, rf = _ARITH[func], _scalar(left, desc), _scalar(right, desc)
            return lambda t: _checked(arith, lf(t), rf(t))
        case CallUnary(UnaryFunc.NOT, inner):
            f = _scalar(inner, desc)
            return lambda t: pc.invert(f(t))
        case CallUnary(UnaryFunc.IS_NULL, inner):
            f = _scalar(inner, desc)
            return lambda t: pc.is_null(f(t))
        case CallUnary(UnaryFunc.NEG, inner) if _type(inner, desc).kind is K.INT64:
            f = _scalar(inner, desc)
            return lambda t: _checked(pc.negate_checked, f(t))
        case CallVariadic(VariadicFunc.COALESCE, exprs):
            kinds = {_type(e, desc).kind for e in exprs}
            if len(kinds) != 1 or not kinds <= _COMPARABLE:
                raise Unsupported("coalesce of these types")
            fs = [_scalar(e, desc) for e in exprs]
            return lambda t: pc.coalesce(*(f(t) for f in fs))
        case Cast() if _int_to_numeric(expr, desc):
            f, target = _scalar(expr.expr, desc), arrow_type(expr.type)
            return lambda t: pc.cast(f(t), target)
    raise Unsupported(f"scalar {type(expr).__name__}")
