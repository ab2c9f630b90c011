"""What every plan means, evaluated in plain Python: :func:`evaluate`.

The contents of a plan at time ``t`` are the plan evaluated on the contents of its inputs
accumulated at ``t``, with ``now() = t``; :func:`evaluate` computes exactly that, for one plan
and one time. It is the executable definition of the semantics :mod:`spate.plan.relation`
documents (scalars: :mod:`spate.plan.evaluation.scalar`), and a renderer must agree with it.

The environment evaluates with it the reads that need no dataflow (constant ``SELECT``s, a
filter/map/project over one collection's rows, what an index lookup leaves to do on the rows it
found, any one-off read over small inputs: :mod:`spate.environment.small_reads`, which bounds
it with ``max_rows``); the tests use it as their oracle (:mod:`spate.testing.reference` applies
it to whole dataflows at every time).

Collections are multisets: ``Counter[Row]`` mapping each row to its multiplicity (never 0, may be
negative). Rows hold canonical datums (:func:`~spate.plan.evaluation.values.canonical`).
Nothing here is fast; everything here should be obviously right, and the reads that use it are
small.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Context, Decimal
from typing import Any

from spate.ids import GlobalId
from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.errors import EvalError
from spate.plan.evaluation.interrupt import check, checked
from spate.plan.evaluation.recursive import fixpoint, free_subplans
from spate.plan.evaluation.scalar import compile_scalar, shown
from spate.plan.evaluation.values import (
    canonical,
    canonical_row,
    check_int64,
    compare,
    compare_by,
    compare_nulls_last,
    compare_rows,
    fit_numeric,
    value_key,
)
from spate.plan.expr import ScalarExpr
from spate.plan.finishing import ColumnOrder
from spate.plan.infer import typ
from spate.plan.numeric_division import divide
from spate.plan.recursive import Recursive, RecursiveRef
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
from spate.plan.window import Window, WindowExpr, WindowFunc
from spate.plan.window_func import FrameMode, WindowFrame
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import Datum, Row, ScalarKind, ScalarType

__all__ = [
    "Multiset",
    "TooLarge",
    "aggregate",
    "compare_ordered",
    "consolidated",
    "evaluate",
    "table_function",
]

_EXACT = Context(prec=200)
"""Wide enough that sums and quotients of numeric(38,s) values are exact before rounding."""

Multiset = Counter[Row]
_identity = id  # ``go`` binds ``id`` in its match


def consolidated(pairs: Iterable[tuple[Row, int]]) -> Multiset:
    """Sum multiplicities per row; drop zeros."""
    out: Multiset = Counter()
    for row, diff in checked(pairs):  # (a canceled evaluation stops here: .interrupt)
        out[row] += diff
    return Counter({r: d for r, d in out.items() if d != 0})


# --- relational evaluation -------------------------------------------------------------------


class TooLarge(Exception):
    """An evaluation with ``max_rows`` met a node holding (or a join about to produce) more
    distinct rows than that: not an evaluation error, a plan to leave to a dataflow."""


def evaluate(
    plan: RelationExpr,
    inputs: Mapping[GlobalId, Mapping[Row, int]],
    now: int,
    *,
    max_rows: int | None = None,
) -> Multiset:
    """``plan`` on the accumulated ``inputs`` (by collection id), with ``now() = now``.
    With ``max_rows``, :class:`TooLarge` as soon as a node's contents (or a join's pairs, or a
    table function's rows, counted before they are built) exceed it."""
    return _Evaluator(inputs, now, max_rows).go(plan)


class _Evaluator:
    def __init__(
        self, inputs: Mapping[GlobalId, Mapping[Row, int]], now: int, max_rows: int | None = None
    ) -> None:
        self.inputs = inputs
        self.now = now
        self.max_rows = max_rows
        self.bindings: dict[int, Multiset] = {}
        """The working tables of the ``Recursive`` nodes being evaluated, by binding."""
        self.fixed: dict[int, Multiset] = {}
        """Contents of sub-plans that do not change between a fixpoint's rounds, by ``id``."""
        self.memo: dict[int, Multiset] = {}
        """Contents of the sub-plans evaluated outside any working table, by ``id`` (the plan
        holds them all for the evaluation's length, so ids are not reused)."""

    def check_size(self, n: int, what: str) -> None:
        if self.max_rows is not None and n > self.max_rows:
            raise TooLarge(f"{what}: {n} rows, more than {self.max_rows}")

    def go(self, plan: RelationExpr) -> Multiset:
        """The contents of ``plan``; a sub-plan shared by several parents (the same object:
        decorrelated subqueries read the outer relation many times) is evaluated once, except
        under a ``Recursive``'s working table, which changes between rounds."""
        memo = not self.bindings
        if memo and _identity(plan) in self.memo:
            return self.memo[_identity(plan)]
        out = self.contents(plan)
        self.check_size(len(out), type(plan).__name__)
        if memo:
            self.memo[_identity(plan)] = out
        return out

    def contents(self, plan: RelationExpr) -> Multiset:
        check()
        if self.fixed and _identity(plan) in self.fixed:
            return self.fixed[_identity(plan)]
        match plan:
            case Get(id, desc):
                if id not in self.inputs:
                    raise EvalError(f"Get: no contents given for {id}")
                return self.rows_of(self.inputs[id].items(), desc, str(id))
            case Constant(rows, desc):
                return self.rows_of(rows, desc, "Constant")
            case Map():
                return self.map(plan)
            case Filter(inp, predicates):
                keep = self.predicate(predicates, inp.desc.columns)
                return consolidated((r, m) for r, m in checked(self.go(inp).items()) if keep(r))
            case Project(inp, outputs, _):
                return consolidated(
                    (tuple(r[i] for i in outputs), m) for r, m in self.go(inp).items()
                )
            case FlatMap(inp, func, exprs, _):
                return self.flat_map(inp, func, exprs)
            case Join():
                return self.join(plan)
            case Reduce():
                return self.reduce(plan)
            case TopK(inp, key, order_by, limit, offset):
                return self.top_k(inp, key, order_by, limit, offset)
            case Distinct(inp):
                present = self.nonnegative(inp, "Distinct")
                return Counter(dict.fromkeys(present, 1))
            case Negate(inp):
                return Counter({r: -m for r, m in self.go(inp).items()})
            case Threshold(inp):
                return Counter({r: m for r, m in self.go(inp).items() if m > 0})
            case Union(operands):
                return consolidated(
                    pair for operand in operands for pair in self.go(operand).items()
                )
            case ArrangeBy(inp, _):
                return self.go(inp)
            case Window():
                return self.window(plan)
            case Recursive():
                return self.recursive(plan)
            case RecursiveRef(binding, _):
                if binding not in self.bindings:
                    raise EvalError(f"RecursiveRef #{binding} outside its Recursive")
                return self.bindings[binding]
        raise EvalError(f"cannot evaluate {type(plan).__name__}")

    def recursive(self, plan: Recursive) -> Multiset:
        base = self.go(plan.base)
        free = [p for p in free_subplans(plan.step, plan.binding) if id(p) not in self.fixed]
        for p in free:
            self.fixed[id(p)] = self.go(p)

        def step(working: Multiset) -> Multiset:
            self.bindings[plan.binding] = working
            return self.go(plan.step)

        outer = self.bindings.get(plan.binding)  # a nested Recursive may reuse the binding
        try:
            return fixpoint(plan, base, step)
        finally:
            if outer is None:
                self.bindings.pop(plan.binding, None)
            else:
                self.bindings[plan.binding] = outer
            for p in free:
                self.fixed.pop(id(p), None)

    @staticmethod
    def rows_of(pairs: Iterable[tuple[Row, int]], desc: RelationDesc, what: str) -> Multiset:
        valid: list[tuple[Row, int]] = []
        for i, (row, m) in enumerate(checked(pairs)):
            desc.validate_row(row, collection=what, row_index=i)
            valid.append((canonical_row(tuple(row), desc.columns), m))
        return consolidated(valid)

    def nonnegative(self, inp: RelationExpr, node: str) -> Multiset:
        rows = self.go(inp)
        for r, m in rows.items():
            if m < 0:
                raise EvalError(f"{node}: input row {r} has negative multiplicity {m}")
        return rows

    def predicate(
        self, predicates: Sequence[ScalarExpr], columns: Sequence[Column]
    ) -> Callable[[Row], bool]:
        compiled = [compile_scalar(p, columns) for p in predicates]
        now = self.now
        return lambda row: all(p(row, now) is True for p in compiled)

    def map(self, plan: Map) -> Multiset:
        inp = plan.input
        arity = inp.desc.arity
        columns = plan.desc.columns
        compiled = [
            (compile_scalar(s, columns[: arity + i]), columns[arity + i].type)
            for i, s in enumerate(plan.scalars)
        ]
        out: list[tuple[Row, int]] = []
        for row, m in checked(self.go(inp).items()):
            values = list(row)
            for s, (fn, t) in zip(plan.scalars, compiled, strict=True):
                try:
                    values.append(canonical(fn(tuple(values), self.now), t))
                except EvalError as e:  # name the expression and the row, as dataflows do
                    names = [c.name for c in columns[: len(values)]]
                    cells = [
                        f"{n}={'NULL' if v is None else v!s}"
                        for n, v in zip(names, row, strict=False)
                    ]
                    where = f"evaluating {shown(s, names)} on row ({', '.join(cells)})"
                    raise EvalError(
                        f"{e} {where}", sqlstate=e.sqlstate, pg_message=e.pg_message
                    ) from None
            out.append((tuple(values), m))
        return consolidated(out)

    def flat_map(self, inp: RelationExpr, func: TableFunc, exprs: Sequence[ScalarExpr]) -> Multiset:
        compiled = [compile_scalar(e, inp.desc.columns) for e in exprs]
        out: list[tuple[Row, int]] = []
        for row, m in self.go(inp).items():
            args = [fn(row, self.now) for fn in compiled]
            if self.max_rows is not None and func is TableFunc.GENERATE_SERIES:
                self.check_size(len(out) + _series_length(args), "FlatMap")
            out.extend(((*row, v), m) for v in checked(table_function(func, args)))
            self.check_size(len(out), "FlatMap")
        return consolidated(out)

    def join(self, plan: Join) -> Multiset:
        """Cross product of the inputs, filtered by each equivalence class as soon as all of its
        columns are present, then by the residual predicates. (The pairs a class links are
        found through a hash of the operand on its columns: canonical datums that compare
        equal hash alike, as ``Reduce``'s grouping relies on; NULL keys match nothing.)"""
        offsets = plan.input_offsets()
        ends = [o + i.desc.arity for o, i in zip(offsets, plan.operands, strict=True)]
        partial: list[tuple[Row, int]] = [((), 1)]
        for k, operand in enumerate(plan.operands):
            contents = self.go(operand)
            checks = [
                cls for cls in plan.equivalences if max(cls) < ends[k] and max(cls) >= offsets[k]
            ]
            linked = [cls for cls in checks if min(cls) < offsets[k]]
            pairs: Iterable[tuple[tuple[Row, int], tuple[Row, int]]]
            if linked:
                left_cols = [min(cls) for cls in linked]
                right_cols = [min(p for p in cls if p >= offsets[k]) - offsets[k] for cls in linked]
                index: dict[Row, list[tuple[Row, int]]] = {}
                for right, m in contents.items():
                    key = tuple(right[c] for c in right_cols)
                    if None not in key:
                        index.setdefault(key, []).append((right, m))
                matches = [
                    (lm, index.get(tuple(lm[0][c] for c in left_cols), ())) for lm in partial
                ]
                self.check_size(sum(len(rms) for _, rms in matches), "Join")
                pairs = ((lm, rm) for lm, rms in matches for rm in rms)
            else:
                self.check_size(len(partial) * len(contents), "Join")
                pairs = itertools.product(partial, contents.items())
            partial = [
                (left + right, m1 * m2)
                for (left, m1), (right, m2) in checked(pairs)
                if all(_all_equal([(left + right)[p] for p in cls]) for cls in checks)
            ]
        keep = self.predicate(plan.predicates, plan.desc.columns)
        return consolidated((r, m) for r, m in checked(partial) if keep(r))

    def reduce(self, plan: Reduce) -> Multiset:
        inp, key, aggregates = plan.input, plan.group_key, plan.aggregates
        rows = self.nonnegative(inp, "Reduce")
        groups: dict[Row, list[tuple[Row, int]]] = {}
        for r, m in checked(rows.items()):
            groups.setdefault(tuple(r[i] for i in key), []).append((r, m))
        out_types = [c.type for c in plan.desc.columns[len(key) :]]
        compiled = [compile_scalar(a.expr, inp.desc.columns) for a in aggregates]
        scales = [_scale(a.expr, inp.desc.columns) for a in aggregates]
        out: Multiset = Counter()
        for k, members in checked(groups.items()):
            values = []
            for agg, fn, t, s in zip(aggregates, compiled, out_types, scales, strict=True):
                pairs = [(fn(r, self.now), m) for r, m in members]
                values.append(aggregate(agg, pairs, t, in_scale=s))
            out[(*k, *values)] = 1
        return out

    def top_k(
        self,
        inp: RelationExpr,
        key: Sequence[int],
        order_by: Sequence[ColumnOrder],
        limit: int | None,
        offset: int,
    ) -> Multiset:
        rows = self.nonnegative(inp, "TopK")
        groups: dict[Row, list[tuple[Row, int]]] = {}
        for r, m in checked(rows.items()):
            groups.setdefault(tuple(r[i] for i in key), []).append((r, m))
        order = functools.cmp_to_key(functools.partial(compare_ordered, order_by))
        end = None if limit is None else offset + limit
        out: Multiset = Counter()
        for members in groups.values():
            rank = 0  # ranks [rank, rank + m) belong to the next row
            for r, m in sorted(members, key=lambda rm: order(rm[0])):
                lo, hi = max(rank, offset), rank + m if end is None else min(rank + m, end)
                if hi > lo:
                    out[r] = hi - lo
                rank += m
        return out

    def window(self, plan: Window) -> Multiset:
        """Each partition's rows sorted once in the window order (a row of multiplicity ``n``
        as ``n`` rows), each with every function's value at its position, each function over
        its own frame (:mod:`spate.plan.window`)."""
        inp, order_by = plan.input, plan.order_by
        columns = inp.desc.columns
        groups: dict[Row, list[Row]] = {}
        for r, m in self.nonnegative(inp, "Window").items():
            groups.setdefault(tuple(r[i] for i in plan.partition_by), []).extend([r] * m)
        order = functools.cmp_to_key(functools.partial(compare_ordered, order_by))
        out_types = [c.type for c in plan.desc.columns[inp.desc.arity :]]
        compiled = [
            (
                f,
                t,
                compile_scalar(f.expr, columns) if f.expr is not None else None,
                compile_scalar(f.default, columns)
                if isinstance(f, WindowExpr) and f.default is not None
                else None,
            )
            for f, t in zip(plan.funcs, out_types, strict=True)
        ]
        out: list[tuple[Row, int]] = []
        for members in groups.values():
            rows = sorted(members, key=order)
            n = len(rows)
            # each position's peer group (equal ORDER BY values; all rows without ORDER BY):
            # its first and last positions and its ordinal
            first, last, ordinal = [0] * n, [n - 1] * n, [1] * n
            for i in range(1, n):
                new = _starts_peer_group(order_by, rows[i - 1], rows[i])
                first[i] = i if new else first[i - 1]
                ordinal[i] = ordinal[i - 1] + new
            for i in range(n - 2, -1, -1):
                new = _starts_peer_group(order_by, rows[i], rows[i + 1])
                last[i] = i if new else last[i + 1]
            columns_out: list[list[Datum]] = []
            bounds_of: dict[WindowFrame, list[tuple[int, int]]] = {}
            for (f, t, fn, default), frame in zip(compiled, plan.frames, strict=True):
                values = [None if fn is None else fn(r, self.now) for r in rows]
                if frame not in bounds_of:
                    bounds_of[frame] = _frame_bounds(frame, first, last)
                bounds = bounds_of[frame]
                if isinstance(f, AggregateExpr):
                    by_frame: dict[tuple[int, int], Datum] = {}  # one value per distinct frame
                    s = _scale(f.expr, columns)
                    for lo, hi in set(bounds):
                        by_frame[(lo, hi)] = _frame_aggregate(f, values[lo : hi + 1], t, s)
                    col = [by_frame[b] for b in bounds]
                elif f.func is WindowFunc.ROW_NUMBER:
                    col = list(range(1, n + 1))
                elif f.func is WindowFunc.RANK:
                    col = [p + 1 for p in first]
                elif f.func is WindowFunc.DENSE_RANK:
                    col = list(ordinal)
                elif f.func is WindowFunc.PERCENT_RANK:
                    col = [p / (n - 1) if n > 1 else 0.0 for p in first]
                elif f.func is WindowFunc.CUME_DIST:
                    col = [(e + 1) / n for e in last]
                elif f.func is WindowFunc.NTILE:
                    col = [_ntile(i, n, f.offset) for i in range(n)]
                elif f.func in (WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE):
                    pick = 0 if f.func is WindowFunc.FIRST_VALUE else 1
                    col = [canonical(values[b[pick]], t) if b[0] <= b[1] else None for b in bounds]
                elif f.func is WindowFunc.NTH_VALUE:
                    k = f.offset - 1
                    col = [
                        canonical(values[lo + k], t) if lo + k <= hi else None for lo, hi in bounds
                    ]
                else:
                    step = -f.offset if f.func is WindowFunc.LAG else f.offset
                    col = [
                        canonical(values[i + step], t)
                        if 0 <= i + step < n
                        else (None if default is None else canonical(default(rows[i], self.now), t))
                        for i in range(n)
                    ]
                columns_out.append(col)
            out.extend(((*row, *(c[i] for c in columns_out)), 1) for i, row in enumerate(rows))
        return consolidated(out)


def _frame_bounds(frame: WindowFrame, first: list[int], last: list[int]) -> list[tuple[int, int]]:
    """Each position's frame ``[lo, hi]`` (inclusive; empty when ``lo > hi``), given each
    position's first and last peer."""
    n = len(first)
    out: list[tuple[int, int]] = []
    for i in range(n):
        if frame.mode is FrameMode.ROWS:
            lo = 0 if frame.start is None else max(0, i + frame.start)
            hi = n - 1 if frame.end is None else min(n - 1, i + frame.end)
        else:
            lo = 0 if frame.start is None else first[i]
            hi = n - 1 if frame.end is None else last[i]
        out.append((lo, hi) if lo <= hi else (0, -1))
    return out


def _frame_aggregate(
    agg: AggregateExpr, values: Sequence[Datum], out: ScalarType, in_scale: int
) -> Datum:
    """``agg`` over a frame's values in the frame's order (``string_agg`` concatenates them in
    that order, where ``Reduce`` sorts them)."""
    if agg.func is AggregateFunc.STRING_AGG:
        assert agg.delimiter is not None
        present = [v for v in values if v is not None]
        return agg.delimiter.join(str(v) for v in present) if present else None
    return aggregate(agg, [(v, 1) for v in values], out, in_scale=in_scale)


def _ntile(i: int, n: int, buckets: int) -> int:
    """The bucket (1-based) of position ``i`` of ``n`` rows in ``buckets`` buckets, the first
    ``n mod buckets`` of them one row larger (PostgreSQL's ntile)."""
    size, extra = divmod(n, buckets)
    if i < extra * (size + 1):
        return i // (size + 1) + 1
    return extra + (i - extra * (size + 1)) // size + 1


def _starts_peer_group(order_by: Sequence[ColumnOrder], before: Row, row: Row) -> bool:
    """``row`` (right after ``before`` in the window order) is not its peer: some ORDER BY
    value differs (NULL equals NULL). Without ORDER BY every row is a peer."""
    return any(compare_nulls_last(before[o.column], row[o.column]) != 0 for o in order_by)


def _all_equal(values: Sequence[Datum]) -> bool:
    if any(v is None for v in values):
        return False
    return all(compare(values[0], v) == 0 for v in values[1:])


def compare_ordered(order_by: Sequence[ColumnOrder], a: Row, b: Row) -> int:
    """Order rows by ``order_by`` (PostgreSQL NULL placement), ties by the whole row."""
    return compare_by(order_by, a, b) or compare_rows(a, b)


def table_function(func: TableFunc, args: Sequence[Datum]) -> list[Datum]:
    """The values ``func(args)`` produces, in order (see :class:`TableFunc`)."""
    if func is TableFunc.UNNEST:
        return list(args)
    if any(a is None for a in args):
        return []
    if func is TableFunc.GENERATE_SERIES:
        start, stop = args[0], args[1]
        step = args[2] if len(args) > 2 else 1
        assert isinstance(start, int) and isinstance(stop, int) and isinstance(step, int)
        if step == 0:
            return []
        return list(range(start, stop + (1 if step > 0 else -1), step))
    if func is TableFunc.STRING_TO_TABLE:
        text, delimiter = args
        assert isinstance(text, str) and isinstance(delimiter, str)
        if text == "":
            return []
        return [text] if delimiter == "" else list(text.split(delimiter))
    raise EvalError(f"unknown table function {func}")


def _series_length(args: Sequence[Datum]) -> int:
    """How many values ``generate_series(*args)`` has (counted, not built)."""
    start, stop = args[0], args[1]
    step = args[2] if len(args) > 2 else 1
    if not (isinstance(start, int) and isinstance(stop, int) and isinstance(step, int)):
        return 0
    return len(range(start, stop + (1 if step > 0 else -1), step)) if step else 0


def _scale(expr: ScalarExpr, columns: Sequence[Column]) -> int:
    """The scale of a numeric expression's type (0 for other types)."""
    return typ(expr, columns).type.scale or 0


def aggregate(
    agg: AggregateExpr,
    pairs: Sequence[tuple[Datum, int]],
    out: ScalarType,
    *,
    in_scale: int = 0,
) -> Datum:
    """``agg`` over values with multiplicities (NULLs among them are skipped); ``in_scale``:
    the scale of a numeric input (the display scale of its sum, for ``avg``)."""
    values: list[tuple[Any, int]] = [(v, m) for v, m in pairs if v is not None and m != 0]
    if agg.distinct:
        distinct: list[Any] = []
        for v, _ in values:
            if not any(compare(v, d) == 0 for d in distinct):
                distinct.append(v)
        values = [(v, 1) for v in distinct]
    f = agg.func
    if f is AggregateFunc.COUNT:
        return sum(m for _, m in values)
    if not values:
        return None
    what = f"{f.value}({agg.expr})"
    if f is AggregateFunc.SUM:
        return _sum(values, out, what)
    if f in (AggregateFunc.MIN, AggregateFunc.MAX):
        pick = min if f is AggregateFunc.MIN else max
        chosen: Datum = pick((v for v, _ in values), key=value_key)
        return chosen
    if f is AggregateFunc.AVG:
        n = sum(m for _, m in values)
        if out.kind is ScalarKind.NUMERIC:
            assert out.scale is not None
            quotient = divide(_decimal_sum(values), Decimal(n), in_scale, 0, out.scale)
            return fit_numeric(quotient, out, what)
        if all(isinstance(v, int) for v, _ in values):
            return canonical(sum(v * m for v, m in values) / n, out)
        return canonical(math.fsum(v * m for v, m in values) / n, out)
    if f is AggregateFunc.BOOL_AND:
        return all(v for v, _ in values)
    if f is AggregateFunc.BOOL_OR:
        return any(v for v, _ in values)
    if f is AggregateFunc.STRING_AGG:
        assert agg.delimiter is not None
        ordered = sorted((v for v, m in values for _ in range(m)), key=value_key)
        return agg.delimiter.join(ordered)
    raise EvalError(f"unknown aggregate {f}")


def _decimal_sum(values: Sequence[tuple[Any, int]]) -> Decimal:
    total = Decimal(0)
    for v, m in values:
        total = _EXACT.add(total, _EXACT.multiply(Decimal(v), Decimal(m)))
    return total


def _sum(values: Sequence[tuple[Any, int]], out: ScalarType, what: str) -> Datum:
    if out.kind is ScalarKind.INT64:
        return check_int64(sum(v * m for v, m in values), what)
    if out.kind is ScalarKind.NUMERIC:
        return fit_numeric(_decimal_sum(values), out, what)
    return canonical(math.fsum(v * m for v, m in values), out)
