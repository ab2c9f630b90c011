"""Queries: SELECT, set operations, VALUES and WITH, bound and lowered to the plan IR.

A query is lowered against an optional *context* (:class:`Context`): the distinct values of the
outer columns a correlated subquery uses, which become the first columns ("prefix") of every
relation built for it; the FROM clause is joined to the context, keyed operators get the prefix
in their keys, and outer references read the prefix (see :mod:`spate.sql.subquery`).

Clause order follows PostgreSQL: FROM → WHERE → GROUP BY → HAVING → SELECT → DISTINCT [ON] →
ORDER BY → LIMIT/OFFSET. ``ORDER BY … LIMIT`` inside a view or subquery becomes ``TopK``; at the
top of a SELECT it finishes the read (:class:`Output`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlglot import exp

from spate.plan.expr import ColumnRef, Literal, ScalarExpr
from spate.plan.finishing import ColumnOrder
from spate.plan.recursive import DEFAULT_MAX_ITERATIONS, RecursiveRef
from spate.plan.relation import (
    Constant,
    Distinct,
    Get,
    Map,
    Negate,
    RelationExpr,
    Threshold,
    TopK,
    Union,
)
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import TEXT, Datum
from spate.sql.catalog import Catalog
from spate.sql.declared import column_types
from spate.sql.errors import (
    DatatypeMismatch,
    FeatureNotSupported,
    InvalidColumnReference,
    SqlError,
    SqlSyntaxError,
    UndefinedTable,
)
from spate.sql.parse import position
from spate.sql.recursive import is_recursive, plan_recursive
from spate.sql.relops import build_join
from spate.sql.scalar import ScalarBinder, Typed
from spate.sql.scope import Col, Correlation, Rel, Scope, hide, project, unique_names
from spate.sql.types import UNKNOWN, PgType, common_type, from_scalar
from spate.sql.values import convert_text


@dataclass
class Context:
    """A correlated subquery's context: distinct outer values (``relation``) and how outer
    columns map onto them (``correlation``)."""

    relation: RelationExpr
    correlation: Correlation

    @property
    def arity(self) -> int:
        return self.relation.desc.arity


@dataclass
class Output:
    """A lowered query: ``rel`` holds the context prefix, the ``names`` columns, then columns
    only ``order_by`` reads; ``order_by``/``limit``/``offset`` are still to be applied."""

    rel: Rel
    names: list[str]
    types: list[PgType]
    prefix: int
    order_by: list[ColumnOrder] = field(default_factory=list)
    limit: int | None = None
    offset: int = 0
    literals: dict[int, str | None] = field(default_factory=dict)
    """Output columns that are untyped literals (a quoted string, or NULL: ``None``), typed as
    text here; a set operation gives them the other branches' type, as PostgreSQL does."""


SelectLowering = Callable[["QueryPlanner", exp.Select, "Context | None"], "Output"]
TableFunctionLowering = Callable[["QueryPlanner", exp.Expression, "str | None", list[str]], Rel]


class QueryPlanner:
    """Lowers queries; one per statement."""

    def __init__(
        self,
        catalog: Catalog,
        text: str,
        dialect: str = "postgres",
        *,
        select: SelectLowering,
        table_function: TableFunctionLowering,
    ) -> None:
        self.catalog = catalog
        self.text = text
        self.dialect = dialect
        # The lowering of a SELECT block and of a table function in FROM, which recurse into
        # this planner for their subqueries: given by the statement planner, so that this
        # module does not depend on the modules that depend on it.
        self.select = select
        self.table_function = table_function
        self.ctes: list[dict[str, tuple[exp.Expression, list[str] | None]]] = []
        self.allow_now = True
        self.today: dt.date | None = None
        """The current date when planning a one-off query (module docs of
        :mod:`spate.sql.age`), else ``None``."""
        self.recursion_limit = DEFAULT_MAX_ITERATIONS
        """The bound on each WITH RECURSIVE's rounds (``SET recursion_limit``)."""
        self.recursive_ctes: set[int] = set()
        """The bodies (by ``id``) of the CTEs that read themselves under WITH RECURSIVE."""
        self.working: dict[int, tuple[RecursiveRef, list[PgType], list[str]]] = {}
        """Markers standing for a recursive CTE's working table in its recursive term."""
        self._bindings = itertools.count()

    def next_binding(self) -> int:
        return next(self._bindings)

    @contextlib.contextmanager
    def working_table(
        self, name: str, ref: RecursiveRef, types: list[PgType], names: list[str]
    ) -> Iterator[None]:
        """Inside, ``name`` reads the working table ``ref`` (a recursive term)."""
        marker = exp.Anonymous(this=f"working table {name}")
        self.working[id(marker)] = (ref, types, names)
        self.ctes.append({name: (marker, None)})
        try:
            yield
        finally:
            self.ctes.pop()
            del self.working[id(marker)]

    def err(self, cls: type[SqlError], message: str, node: exp.Expression | None) -> SqlError:
        return cls(message, position=position(node) if node is not None else None, text=self.text)

    def binder(self, scope: Scope, clause: str = "", override=None) -> ScalarBinder:  # type: ignore[no-untyped-def]
        return ScalarBinder(
            scope,
            text=self.text,
            dialect=self.dialect,
            override=override,
            allow_now=clause in ("WHERE", "HAVING") and self.allow_now,
            clause=clause,
            today=self.today,
        )

    # -- entry points -------------------------------------------------------------------------

    def relation(self, node: exp.Expression, ctx: Context | None = None) -> Output:
        """``node`` as a relation: ORDER BY … LIMIT applied as TopK, helper columns gone."""
        out = self.query(node, ctx)
        return self.finish_inner(out)

    def finish_inner(self, out: Output) -> Output:
        rel = out.rel
        k = out.prefix
        width = k + len(out.names)
        expr = rel.expr
        if out.limit is not None or out.offset:
            expr = TopK(expr, tuple(range(k)), tuple(out.order_by), out.limit, out.offset)
        expr = project(expr, range(width))
        cols = rel.scope.cols[:width]
        return Output(rel.with_cols(expr, cols), out.names, out.types, k, literals=out.literals)

    def query(self, node: exp.Expression, ctx: Context | None) -> Output:
        with_ = node.args.get("with_") or node.args.get("with")
        if with_ is not None:
            recursive = bool(with_.args.get("recursive"))
            frame: dict[str, tuple[exp.Expression, list[str] | None]] = {}
            self.ctes.append(frame)
            try:
                for cte in with_.expressions:
                    cols = [c.name for c in cte.args["alias"].columns] or None
                    frame[cte.alias_or_name] = (cte.this, cols)
                    if recursive and is_recursive(cte.this, cte.alias_or_name):
                        self.recursive_ctes.add(id(cte.this))
                body = node.copy()
                body.set("with_", None)
                body.set("with", None)
                return self.query(body, ctx)
            finally:
                self.ctes.pop()
        if isinstance(node, exp.Select):
            return self.select(self, node, ctx)
        if isinstance(node, exp.SetOperation):
            return self.set_operation(node, ctx)
        if isinstance(node, exp.Subquery):
            inner = self.query(node.this, ctx)
            return self.apply_order_limit(inner, node)
        if isinstance(node, exp.Paren):
            return self.query(node.this, ctx)
        if isinstance(node, exp.Values):
            return self.values(node, ctx)
        raise self.err(FeatureNotSupported, f"unsupported query: {type(node).__name__}", node)

    # -- ORDER BY / LIMIT over a query's output ------------------------------------------------

    def apply_order_limit(self, out: Output, node: exp.Expression) -> Output:
        order = node.args.get("order")
        limit_node = node.args.get("limit")
        offset_node = node.args.get("offset")
        if order is None and limit_node is None and offset_node is None:
            return out
        if out.order_by or out.limit is not None or out.offset:
            out = self.finish_inner(out)
        orders: list[ColumnOrder] = []
        for o in order.expressions if order is not None else []:
            pos = self.output_position(out, o.this)
            if pos is None:
                raise self.err(
                    InvalidColumnReference,
                    "ORDER BY on a set operation or subquery must name an output column",
                    o.this,
                )
            orders.append(self.column_order(out.prefix + pos, o))
        limit, offset = self.limit_offset(limit_node, offset_node)
        return dataclasses.replace(out, order_by=orders, limit=limit, offset=offset)

    def output_position(self, out: Output, node: exp.Expression) -> int | None:
        if isinstance(node, exp.Literal) and not node.is_string:
            n = int(str(node.this))
            if not 1 <= n <= len(out.names):
                raise self.err(
                    InvalidColumnReference, f"ORDER BY position {n} is not in select list", node
                )
            return n - 1
        if isinstance(node, exp.Column) and not node.table:
            hits = [i for i, name in enumerate(out.names) if name == node.name]
            if hits:
                return hits[0]
        return None

    def column_order(self, column: int, o: exp.Expression) -> ColumnOrder:
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        nulls_last = None if nulls_first is None else not bool(nulls_first)
        if nulls_last == (not desc):
            nulls_last = None
        return ColumnOrder(column, desc, nulls_last)

    def limit_offset(
        self, limit_node: exp.Expression | None, offset_node: exp.Expression | None
    ) -> tuple[int | None, int]:
        limit = None
        if limit_node is not None:
            value = limit_node.expression if isinstance(limit_node, exp.Limit) else limit_node
            limit = self.constant_int(value, "LIMIT")
        offset = 0
        if offset_node is not None:
            value = offset_node.expression if isinstance(offset_node, exp.Offset) else offset_node
            offset = self.constant_int(value, "OFFSET") or 0
        return limit, offset

    def constant_int(self, node: exp.Expression, what: str) -> int | None:
        if isinstance(node, exp.Var) and node.name.upper() == "ALL":
            return None
        if isinstance(node, exp.Null):
            return None
        t = self.binder(Scope([], text=self.text)).bind(node)
        if not isinstance(t.expr, Literal) or not (t.type.is_integer or t.type.name == "unknown"):
            raise self.err(
                DatatypeMismatch, f"argument of {what} must be an integer constant", node
            )
        if t.raw is not None or t.param is not None:  # a parameter of LIMIT $1 is bigint
            from spate.sql.types import INT8

            t = self.binder(Scope([], text=self.text)).coerce(t, INT8, node)
        lit = t.expr
        assert isinstance(lit, Literal)
        value = lit.value
        if value is None:
            return None
        assert isinstance(value, int)
        if value < 0:
            raise SqlError(
                f"{what} must not be negative",
                position=position(node),
                text=self.text,
                sqlstate="2201W" if what == "LIMIT" else "2201X",
            )
        return value

    # -- FROM items ---------------------------------------------------------------------------

    def table(self, node: exp.Expression, ctx: Context | None) -> Rel:
        """One FROM item (never joined to the context here)."""
        del ctx
        alias_node = node.args.get("alias")
        alias = alias_node.name if alias_node is not None and alias_node.name else None
        col_aliases = [c.name for c in alias_node.columns] if alias_node is not None else []
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            name = node.name
            cte = self.find_cte(name)
            if cte is not None and not node.args.get("db"):
                body, cols = cte
                if id(body) in self.working:
                    ref, types, names = self.working[id(body)]
                    return self.named(ref, types, names, alias or name, col_aliases)
                # a CTE may not see itself or later CTEs: plan it with the frames outside it
                saved = self.ctes
                depth = next(i for i in range(len(saved) - 1, -1, -1) if name in saved[i])
                self.ctes = [*saved[:depth], {k: v for k, v in saved[depth].items() if k != name}]
                try:
                    if id(body) in self.recursive_ctes:
                        rec, types, names = plan_recursive(self, name, body, cols)
                        return self.named(rec, types, names, alias or name, col_aliases)
                    out = self.relation(body)
                finally:
                    self.ctes = saved
                names = cols or out.names
                return self.named(out.rel.expr, out.types, names, alias or name, col_aliases)
            db = node.args.get("db")
            qualified = f"{db.name}.{name}" if db is not None and db.name else None
            obj = (qualified and self.catalog.lookup(qualified)) or self.catalog.lookup(name)
            if obj is None:
                raise self.err(UndefinedTable, f'relation "{name}" does not exist', node)
            if not obj.readable or obj.id is None or obj.desc is None:
                raise self.err(UndefinedTable, f'{obj.kind} "{name}" cannot be read', node)
            get = Get(obj.id, obj.desc)
            types = column_types(obj)
            return self.named(get, types, list(obj.desc.names), alias or name, col_aliases)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Func):
            func = node.this
            assert isinstance(func, exp.Expression)
            return self.table_function(self, func, alias, col_aliases)
        if isinstance(node, exp.Subquery):
            if node.args.get("lateral"):
                raise self.err(FeatureNotSupported, "LATERAL is not supported", node)
            out = self.relation(node)
            return self.named(out.rel.expr, out.types, out.names, alias, col_aliases)
        if isinstance(node, exp.Values):
            out = self.values(node, None)
            return self.named(out.rel.expr, out.types, out.names, alias, col_aliases)
        if isinstance(node, exp.Lateral):
            raise self.err(FeatureNotSupported, "LATERAL is not supported", node)
        raise self.err(FeatureNotSupported, f"unsupported FROM item: {node.sql()}", node)

    def find_cte(self, name: str) -> tuple[exp.Expression, list[str] | None] | None:
        for frame in reversed(self.ctes):
            if name in frame:
                return frame[name]
        return None

    def named(
        self,
        expr: RelationExpr,
        types: list[PgType],
        names: list[str],
        alias: str | None,
        col_aliases: list[str],
    ) -> Rel:
        if len(col_aliases) > len(names):
            raise self.err(
                SqlError,
                f'table "{alias}" has {len(names)} columns available but '
                f"{len(col_aliases)} columns specified",
                None,
            )
        final = list(col_aliases) + list(names[len(col_aliases) :])
        cols = [Col(n, alias, t) for n, t in zip(final, types, strict=True)]
        if col_aliases:
            expr = project(expr, range(expr.desc.arity))
            from spate.sql.relops import rename

            expr = rename(expr, final)
        return Rel(expr, Scope(cols, None, self.text))

    # -- VALUES -------------------------------------------------------------------------------

    def values(self, node: exp.Expression, ctx: Context | None) -> Output:
        rows = node.expressions
        if not rows:
            raise self.err(SqlSyntaxError, "VALUES needs at least one row", node)
        width = len(rows[0].expressions) if isinstance(rows[0], exp.Tuple) else 1
        bound: list[list[tuple[Typed, exp.Expression]]] = []
        b = self.binder(Scope([], text=self.text), "VALUES")
        for r in rows:
            items = r.expressions if isinstance(r, exp.Tuple) else [r]
            if len(items) != width:
                raise self.err(SqlSyntaxError, "VALUES lists must all be the same length", r)
            bound.append([(b.bind(i), i) for i in items])
        types: list[PgType] = []
        for c in range(width):
            column = [row[c] for row in bound]
            t = common_type([x.type for x, _ in column])
            if t is None:
                raise self.err(DatatypeMismatch, "VALUES types cannot be matched", column[0][1])
            types.append(t)
        names = [f"column{i + 1}" for i in range(width)]
        if all(
            isinstance(b.coerce(x, types[c], n).expr, Literal)
            for row in bound
            for c, (x, n) in enumerate(row)
        ):
            data = []
            for row in bound:
                values = []
                for c, (x, n) in enumerate(row):
                    lit = b.coerce(x, types[c], n).expr
                    assert isinstance(lit, Literal)
                    values.append(lit.value)
                data.append((tuple(values), 1))
            desc = RelationDesc(
                [
                    Column(name, t.scalar, any(r[0][c] is None for r in data))  # type: ignore[arg-type]
                    for c, (name, t) in enumerate(zip(names, types, strict=True))
                ]
            )
            merged: dict[tuple[Datum, ...], int] = {}
            for r, d in data:
                merged[r] = merged.get(r, 0) + d
            expr: RelationExpr = Constant(tuple((r, d) for r, d in merged.items()), desc)
        else:
            parts: list[RelationExpr] = []
            unit = Constant((((), 1),), RelationDesc([]))
            for row in bound:
                scalars = [b.coerce(x, types[c], n).expr for c, (x, n) in enumerate(row)]
                parts.append(Map(unit, tuple(scalars), tuple(names)))
            expr = parts[0] if len(parts) == 1 else Union(tuple(parts))
        rel = Rel(
            expr,
            Scope([Col(n, None, t) for n, t in zip(names, types, strict=True)], None, self.text),
        )
        out = Output(rel, names, types, 0)
        if ctx is not None:
            out = self.under_context(out, ctx)
        return out

    def under_context(self, out: Output, ctx: Context) -> Output:
        """An uncorrelated output, repeated for every context row (prefix prepended)."""
        joined = build_join([ctx.relation, out.rel.expr], [])
        cols = (
            hide([Col(None, None, from_scalar(c.type)) for c in ctx.relation.desc.columns])
            + out.rel.scope.cols
        )
        rel = Rel(joined, Scope(cols, ctx.correlation, self.text))
        shift = ctx.arity
        orders = [dataclasses.replace(o, column=o.column + shift) for o in out.order_by]
        return Output(rel, out.names, out.types, shift + out.prefix, orders, out.limit, out.offset)

    # -- set operations -----------------------------------------------------------------------

    def set_operation(self, node: exp.Expression, ctx: Context | None) -> Output:
        left = self.relation(node.this, ctx)
        right = self.relation(node.expression, ctx)
        if len(left.names) != len(right.names):
            raise self.err(
                SqlSyntaxError,
                f"each {type(node).__name__.upper()} query must have the same number of columns",
                node.expression,
            )
        k = left.prefix
        types: list[PgType] = []
        for i, (a, b) in enumerate(zip(left.types, right.types, strict=True)):
            t = common_type(
                [UNKNOWN if i in left.literals else a, UNKNOWN if i in right.literals else b]
            )
            if t is None or t.scalar is None:
                branch = node.expression
                items = branch.expressions if isinstance(branch, exp.Select) else []
                raise self.err(
                    DatatypeMismatch,
                    f"{type(node).__name__.upper()} types {a} and {b} cannot be matched "
                    f"(column {i + 1})",
                    items[i] if i < len(items) else branch,
                )
            types.append(t)
        lexpr = self.cast_outputs(left, types, node.this)
        rexpr = self.cast_outputs(right, types, node.expression)
        rexpr = project(rexpr, range(rexpr.desc.arity))
        from spate.sql.interval_ops import canonical_rows
        from spate.sql.relops import rename

        rexpr = rename(rexpr, lexpr.desc.names)
        distinct = node.args.get("distinct", True) is not False
        if distinct or not isinstance(node, exp.Union):  # rows equal by the intervals' spans
            lexpr, rexpr = canonical_rows(lexpr), canonical_rows(rexpr)
        if isinstance(node, exp.Union):
            expr: RelationExpr = Union((lexpr, rexpr))
            if distinct:
                expr = Distinct(expr)
        elif isinstance(node, exp.Except):
            if distinct:
                expr = Threshold(Union((Distinct(lexpr), Negate(Distinct(rexpr)))))
            else:
                expr = Threshold(Union((lexpr, Negate(rexpr))))
        elif isinstance(node, exp.Intersect):
            la, rb = (Distinct(lexpr), Distinct(rexpr)) if distinct else (lexpr, rexpr)
            expr = Union((la, Negate(Threshold(Union((la, Negate(rb)))))))
        else:
            raise self.err(FeatureNotSupported, "unsupported set operation", node)
        cols = left.rel.scope.cols[:k] + [
            Col(n, None, t) for n, t in zip(left.names, types, strict=True)
        ]
        rel = Rel(expr, Scope(cols, left.rel.scope.parent, self.text))
        literals = {
            i: left.literals[i]
            for i in left.literals
            if i in right.literals and left.literals[i] == right.literals[i]
        }
        out = Output(rel, list(left.names), types, k, literals=literals)
        return self.apply_order_limit(out, node)

    def cast_outputs(
        self, out: Output, types: list[PgType], branch: exp.Expression
    ) -> RelationExpr:
        expr = out.rel.expr
        k = out.prefix
        if not out.literals and all(
            a.scalar == b.scalar for a, b in zip(out.types, types, strict=True)
        ):
            return expr
        b = self.binder(out.rel.scope)
        scalars: list[ScalarExpr] = []
        for i, (have, want) in enumerate(zip(out.types, types, strict=True)):
            t = Typed(ColumnRef(k + i), have)
            if i in out.literals:
                raw = out.literals[i]
                t = Typed(Literal(raw, TEXT), UNKNOWN, raw=raw)
            items = branch.expressions if isinstance(branch, exp.Select) else []
            where = items[i] if i < len(items) else branch
            scalars.append(b.coerce(t, want, where, explicit=True).expr)
        names = unique_names([*expr.desc.names, *out.names])[expr.desc.arity :]
        mapped = Map(expr, tuple(scalars), tuple(names))
        a = expr.desc.arity
        return project(mapped, [*range(k), *range(a, a + len(types))])


def literal_value(text: str, t: PgType) -> object:
    return convert_text(text, t)
