"""Subqueries in expressions, decorrelated into joins of existing IR operators.

A subquery over the relation ``X`` being built is lowered once per **distinct** value of the
outer columns it uses (``K``): ``D = Distinct(Project(X, K))`` is its context, and the subquery
comes out as a relation whose first ``|K|`` columns are the context (see
:mod:`spate.sql.query`). Which columns it uses is found by lowering it first with all of
``X``'s columns available and recording the ones resolved. Then, per construct:

* ``EXISTS``: ``E = Distinct(keys(S))``. A WHERE conjunct is the semijoin ``X ⋉ E`` (``NOT
  EXISTS``: ``X − (X ⋉ E)``); elsewhere its value is ``lookup(D, E ↦ TRUE, FALSE)`` joined to
  ``X`` on ``K`` (null-safe: a NULL context value meets itself).
* scalar subquery: the single column, per key, or NULL where there is no row
  (``lookup(D, S, NULL)``); a global aggregate has its own per-key default (count → 0, the
  "count bug"). A subquery that is not known to return one row per key is reduced with ``max``.
* ``x IN (S)`` / ``= ANY``: three facts per key — some ``s = x`` (a semijoin on ``K`` and
  ``x = s``), ``S`` holds a NULL, ``S`` is non-empty — and ``CASE WHEN matched THEN TRUE WHEN
  has_null OR (x IS NULL AND non_empty) THEN NULL ELSE FALSE END``; a WHERE conjunct ``x IN (S)``
  is just the semijoin. ``NOT IN`` / ``<> ALL`` negate that value (so one NULL in ``S`` empties a
  ``NOT IN``, as in PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    Case,
    ColumnRef,
    Literal,
    ScalarExpr,
    UnaryFunc,
)
from spate.plan.relation import Distinct, Filter, Map, Reduce, RelationExpr
from spate.repr.types import BOOL, ScalarKind
from spate.sql.checks import at_most_one_row
from spate.sql.errors import FeatureNotSupported, SqlError, SqlSyntaxError
from spate.sql.operators import COMPARISON_OPS
from spate.sql.query import Context, Output, QueryPlanner
from spate.sql.relops import antijoin, key_join, lookup, semijoin, unit
from spate.sql.scalar import Typed
from spate.sql.scope import Col, Correlation, Rel, project, unique_names
from spate.sql.types import PG_BOOL, common_type, display_name

Override = Callable[[exp.Expression], "Typed | None"]


class SubqueryPlanner:
    def __init__(self, qp: QueryPlanner) -> None:
        self.qp = qp

    # -- WHERE / HAVING conjuncts ---------------------------------------------------------------

    def where(
        self,
        rel: Rel,
        cond: exp.Expression,
        override: Override | None = None,
        clause: str = "WHERE",
    ) -> Rel:
        node, negated = cond, False
        while isinstance(node, (exp.Not, exp.Paren)):
            if isinstance(node, exp.Not):
                negated = not negated
            node = node.this
        if isinstance(node, exp.Exists) and override is None:
            keys, e = self.exists_keys(rel, node.this)
            expr = antijoin(rel.expr, keys, e) if negated else semijoin(rel.expr, keys, e)
            return rel.with_cols(expr, rel.scope.cols)
        if not negated and override is None and _in_query(node) is not None:
            lhs, sub = _in_query(node)  # type: ignore[misc]
            x1, keys, matched, _, _ = self.in_parts(rel, lhs, sub, node, need_value=False)
            expr = project(semijoin(x1.expr, keys, matched), range(rel.arity))
            return rel.with_cols(expr, rel.scope.cols)
        width = rel.arity
        rel2, t = self.scalar(rel, cond, override, clause)
        if t.type.name != "bool":
            raise SqlError(
                f"argument of {clause} must be type boolean, not type {display_name(t.type)}",
                text=self.qp.text,
                sqlstate="42804",
            )
        expr = project(Filter(rel2.expr, (t.expr,)), range(width))
        return rel.with_cols(expr, rel.scope.cols)

    # -- expressions with subqueries --------------------------------------------------------------

    def scalar(
        self,
        rel: Rel,
        node: exp.Expression,
        override: Override | None = None,
        clause: str = "SELECT",
    ) -> tuple[Rel, Typed]:
        found: dict[int, Typed] = {}
        for sub in _outermost_subqueries(node):
            rel, t = self.value(rel, sub)
            found[id(sub)] = t

        def combined(n: exp.Expression) -> Typed | None:
            if id(n) in found:
                return found[id(n)]
            return override(n) if override is not None else None

        binder = self.qp.binder(rel.scope, clause, combined)
        return rel, binder.bind(node)

    def value(self, rel: Rel, node: exp.Expression) -> tuple[Rel, Typed]:
        """``rel`` with the value of subquery construct ``node`` appended as a column."""
        if isinstance(node, exp.Exists):
            keys, e = self.exists_keys(rel, node.this)
            flag = Map(e, (Literal(True, BOOL),), ("exists",))
            d = self.distinct_keys(rel, keys)
            v = lookup(d, flag, [Literal(False, BOOL)])
            return self.attach(rel, keys, v, PG_BOOL)
        quantified = _quantified(node)
        if quantified is not None:
            lhs, sub, op, negate = quantified
            x1, _keys, _m, value, _ = self.in_parts(rel, lhs, sub, node, need_value=True, op=op)
            assert value is not None
            expr = CallUnary(UnaryFunc.NOT, value) if negate else value
            mapped = Map(x1.expr, (expr,), tuple(unique_names([*x1.expr.desc.names, "in"]))[-1:])
            out = project(mapped, [*range(rel.arity), mapped.desc.arity - 1])
            cols = [*rel.scope.cols, Col(None, None, PG_BOOL, hidden=True)]
            return rel.with_cols(out, cols), Typed(ColumnRef(rel.arity), PG_BOOL)
        if isinstance(node, (exp.Any, exp.All)):
            raise self.qp.err(FeatureNotSupported, "ANY/ALL needs a comparison operator", node)
        assert isinstance(node, exp.Subquery)
        return self.scalar_subquery(rel, node)

    def scalar_subquery(self, rel: Rel, node: exp.Subquery) -> tuple[Rel, Typed]:
        keys, d, out = self.correlate(rel, node)
        if len(out.names) != 1:
            raise self.qp.err(SqlSyntaxError, "subquery must return only one column", node)
        k = len(keys)
        s = out.rel.expr
        t = out.types[0]
        if _one_row_per_key(node.this):
            # a global aggregate has its row (or its defaults) for every context key already
            return self.attach(rel, keys, s, t)
        if t.scalar is None or t.scalar.kind is ScalarKind.JSONB:
            raise self.qp.err(FeatureNotSupported, "a jsonb scalar subquery", node)
        value = AggregateExpr(AggregateFunc.MAX, ColumnRef(k))
        rows = AggregateExpr(AggregateFunc.COUNT, Literal(True, BOOL))
        s = at_most_one_row(Reduce(s, tuple(range(k)), (value, rows)), k, t.scalar)
        v = lookup(d, s, [Literal(None, t.scalar)])
        return self.attach(rel, keys, v, t)

    # -- pieces ---------------------------------------------------------------------------------

    def correlate(self, rel: Rel, node: exp.Expression) -> tuple[list[int], RelationExpr, Output]:
        """The outer columns ``K`` the subquery uses, its context ``D`` and the subquery lowered
        under it (uncorrelated: ``K = []``, ``D`` the unit relation)."""
        probe = Correlation(rel.scope, list(range(rel.arity)))
        self.qp.relation(node, Context(Distinct(rel.expr), probe))
        keys = sorted(probe.used)
        if not keys:
            return [], unit(), self.qp.relation(node)
        d = self.distinct_keys(rel, keys)
        corr = Correlation(rel.scope, keys)
        return keys, d, self.qp.relation(node, Context(d, corr))

    def distinct_keys(self, rel: Rel, keys: list[int]) -> RelationExpr:
        if not keys:
            return unit()
        return Distinct(project(rel.expr, keys))

    def exists_keys(self, rel: Rel, sub: exp.Expression) -> tuple[list[int], RelationExpr]:
        """``K`` and ``E = Distinct(K-prefix of S)``: the context keys for which ``sub`` has
        rows."""
        keys, _d, out = self.correlate(rel, sub)
        e = Distinct(project(out.rel.expr, range(len(keys))))
        return keys, e

    def attach(self, rel: Rel, keys: list[int], v: RelationExpr, t: object) -> tuple[Rel, Typed]:
        """``rel`` joined to ``v`` (one row per key, then the value) on ``keys``; the value
        appended."""
        k = len(keys)
        joined = key_join(rel.expr, v, keys, list(range(k)), null_safe=True)
        a = rel.arity
        out = project(joined, [*range(a), a + k])
        cols = [*rel.scope.cols, Col(None, None, t, hidden=True)]  # type: ignore[arg-type]
        return rel.with_cols(out, cols), Typed(ColumnRef(a), t)  # type: ignore[arg-type]

    def in_parts(
        self,
        rel: Rel,
        lhs: exp.Expression,
        sub: exp.Expression,
        node: exp.Expression,
        *,
        need_value: bool,
        op: BinaryFunc = BinaryFunc.EQ,
    ) -> tuple[Rel, list[int], RelationExpr, ScalarExpr | None, int]:
        """For ``lhs IN (sub)``: ``rel`` with the (converted) ``lhs`` appended, the keys
        ``K + [lhs]``, the distinct matched keys, and the IN value as a scalar over the
        returned relation (when asked)."""
        qp = self.qp
        keys, d, out = self.correlate(rel, sub)
        if len(out.names) != 1:
            raise qp.err(SqlSyntaxError, "subquery has too many columns", sub)
        k = len(keys)
        lhs_t = qp.binder(rel.scope, "IN").bind(lhs)
        target = common_type([lhs_t.type, out.types[0]])
        if target is None or target.scalar is None:
            raise qp.err(
                SqlError,
                f"operator does not exist: {display_name(lhs_t.type)} = "
                f"{display_name(out.types[0])}",
                node,
            )
        binder = qp.binder(rel.scope)
        lhs_c = binder.coerce(lhs_t, target, lhs, explicit=True)
        a = rel.arity
        x1_expr = Map(rel.expr, (lhs_c.expr,), (unique_names([*rel.expr.desc.names, "lhs"])[-1],))
        x1 = rel.with_cols(x1_expr, [*rel.scope.cols, Col(None, None, target, hidden=True)])
        s = out.rel.expr
        y = binder.coerce(Typed(ColumnRef(k), out.types[0]), target, sub, explicit=True).expr
        if y != ColumnRef(k):
            s = project(Map(s, (y,)), [*range(k), s.desc.arity])
        d2 = Distinct(project(x1.expr, [*keys, a]))
        if op is BinaryFunc.EQ:
            joined = key_join(d2, s, list(range(k)), list(range(k)), null_safe=True, plain=[(k, k)])
        else:
            paired = key_join(d2, s, list(range(k)), list(range(k)), null_safe=True)
            compare = CallBinary(op, ColumnRef(k), ColumnRef(k + 1 + k))
            joined = Filter(paired, (compare,))
        matched = Distinct(project(joined, range(k + 1)))
        mkeys = [*keys, a]
        if not need_value:
            return x1, mkeys, matched, None, a
        has_null = Distinct(
            project(Filter(s, (CallUnary(UnaryFunc.IS_NULL, ColumnRef(k)),)), range(k))
        )
        nonempty = Distinct(project(s, range(k)))
        rel2 = x1
        flags: list[ScalarExpr] = []
        for base, keyset, e in ((d2, mkeys, matched), (d, keys, has_null), (d, keys, nonempty)):
            flag = Map(e, (Literal(True, BOOL),), ("flag",))
            v = lookup(base, flag, [Literal(False, BOOL)])
            rel2, t = self.attach(rel2, keyset, v, PG_BOOL)
            flags.append(t.expr)
        m, hn, ne = flags
        x = ColumnRef(a)
        value = Case(
            (
                (m, Literal(True, BOOL)),
                (
                    CallBinary(
                        BinaryFunc.OR,
                        hn,
                        CallBinary(BinaryFunc.AND, CallUnary(UnaryFunc.IS_NULL, x), ne),
                    ),
                    Literal(None, BOOL),
                ),
            ),
            Literal(False, BOOL),
        )
        return rel2, mkeys, matched, value, a


_NEGATED: dict[BinaryFunc, BinaryFunc] = {
    BinaryFunc.EQ: BinaryFunc.NE,
    BinaryFunc.NE: BinaryFunc.EQ,
    BinaryFunc.LT: BinaryFunc.GE,
    BinaryFunc.GE: BinaryFunc.LT,
    BinaryFunc.LE: BinaryFunc.GT,
    BinaryFunc.GT: BinaryFunc.LE,
}


def _quantified(
    node: exp.Expression,
) -> tuple[exp.Expression, exp.Expression, BinaryFunc, bool] | None:
    """``(lhs, subquery, op, negate)`` of ``lhs IN (subquery)`` or ``lhs <op> ANY|ALL (…)``:
    the value is ``lhs <op> ANY (subquery)``, negated when ``negate`` (``x <op> ALL (S)`` is
    ``NOT (x <negated op> ANY (S))``)."""
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        q = node.args["query"]
        return node.this, q.this if isinstance(q, exp.Subquery) else q, BinaryFunc.EQ, False
    op = COMPARISON_OPS.get(type(node))
    if op is not None and isinstance(node.expression, (exp.Any, exp.All)):
        quant = node.expression
        q = quant.this
        sub = q.this if isinstance(q, exp.Subquery) else q
        if isinstance(quant, exp.Any):
            return node.this, sub, op, False
        return node.this, sub, _NEGATED[op], True
    return None


def _in_query(node: exp.Expression) -> tuple[exp.Expression, exp.Expression] | None:
    """``(lhs, subquery)`` of ``lhs IN (subquery)`` or ``lhs = ANY (…)``."""
    q = _quantified(node)
    if q is None or q[2] is not BinaryFunc.EQ or q[3]:
        return None
    return q[0], q[1]


def _outermost_subqueries(node: exp.Expression) -> list[exp.Expression]:
    out: list[exp.Expression] = []

    def go(n: exp.Expression) -> None:
        if isinstance(n, exp.Exists) or (
            isinstance(n, exp.Subquery) and not isinstance(n.parent, (exp.In, exp.Any, exp.All))
        ):
            out.append(n)
            return
        if _quantified(n) is not None:
            out.append(n)
            return
        for child in n.iter_expressions():
            go(child)

    go(node)
    return out


def _one_row_per_key(node: exp.Expression) -> bool:
    """A SELECT with aggregates and no GROUP BY returns exactly one row per context key."""
    from spate.sql.aggregates import find_aggregates

    if not isinstance(node, exp.Select) or node.args.get("group") is not None:
        return False
    if node.args.get("having") is not None or node.args.get("limit") is not None:
        return False
    return any(find_aggregates(e) for e in node.expressions)
