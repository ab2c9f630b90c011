"""INSERT and UPDATE."""

from __future__ import annotations

import math

from sqlglot import exp

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    ColumnRef,
    Literal,
    RaiseError,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from spate.plan.relation import Constant, Get, Map, RelationExpr
from spate.repr.types import INT64, TEXT, Datum, ScalarKind
from spate.sql import statements as st
from spate.sql.checks import int_range, strict_cast
from spate.sql.constraints import column_defaults
from spate.sql.declared import column_types, varchar_limits
from spate.sql.errors import (
    DuplicateColumn,
    NumericOutOfRange,
    SqlError,
    StringDataRightTruncation,
    UndefinedColumn,
)
from spate.sql.parse import parse_sql, position
from spate.sql.scalar import ScalarBinder, Typed
from spate.sql.scope import Col, Scope, project
from spate.sql.statement_planner import StatementPlanner
from spate.sql.types import PgType, display_name


def plan_insert(p: StatementPlanner) -> st.Insert:
    node = parse_sql(p.src, p.src.start)
    assert isinstance(node, exp.Insert)
    target = node.this
    columns: list[str] | None = None
    if isinstance(target, exp.Schema):
        columns = [c.name for c in target.expressions]
        target = target.this
    if node.args.get("returning") or node.args.get("conflict"):
        raise p.unsupported("INSERT … RETURNING / ON CONFLICT is not supported")
    obj = p.table_object(target.name, target)
    assert obj.desc is not None
    desc = obj.desc
    limits = varchar_limits(obj.create_sql)
    declared = dict(zip(desc.names, column_types(obj), strict=True))
    explicit = columns is not None
    if columns is None:
        columns = list(desc.names)
    column_nodes = list(node.this.expressions) if isinstance(node.this, exp.Schema) else []
    for i, c in enumerate(columns):
        if c not in desc.names:
            raise UndefinedColumn(
                f'column "{c}" of relation "{obj.name}" does not exist',
                position=position(column_nodes[i] if column_nodes else target),
                text=p.src.text,
            )
        if c in columns[:i]:
            raise DuplicateColumn(f'column "{c}" specified more than once', text=p.src.text)
    source = node.expression
    defaults = _defaults(p, obj.create_sql, declared)
    if source is None:
        raise p.unsupported("INSERT … DEFAULT VALUES is not supported")
    if isinstance(source, exp.Values) and not explicit and source.expressions:
        # no column list: the first columns, as many as the values (the rest take defaults)
        first = source.expressions[0]
        width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
        columns = columns[: max(width, 1)] if width <= len(columns) else columns
    if isinstance(source, exp.Values):
        rows = _literal_rows(
            p, source, [declared[c] for c in columns], list(desc.names), columns, defaults
        )
        if rows is not None:
            return st.Insert(p.src.sql, obj.name, tuple(fit_rows(rows, limits, desc.names)))
    out = p.qp.relation(source)
    if not explicit and len(out.names) < len(columns):
        columns = columns[: len(out.names)]
    if len(out.names) > len(columns):
        raise SqlError(
            "INSERT has more expressions than target columns",
            position=position(source),
            text=p.src.text,
            sqlstate="42601",
        )
    if len(out.names) < len(columns):
        raise SqlError(
            "INSERT has more target columns than expressions",
            position=position(source),
            text=p.src.text,
            sqlstate="42601",
        )
    binder = ScalarBinder(out.rel.scope, text=p.src.text, dialect=p.src.dialect, today=p.qp.today)
    scalars: list[ScalarExpr] = []
    for name in desc.names:
        col = desc.column(name)
        want = declared[name]
        if name in columns:
            i = columns.index(name)
            have = Typed(ColumnRef(i), out.types[i])
            if out.types[i].name == "unknown":
                have = Typed(Literal(None, col.type), want)
            scalars.append(assigned(binder, have, want, source, name))
        else:
            scalars.append(defaults.get(name) or Literal(None, col.type))
    expr = out.rel.expr
    if isinstance(expr, Constant) and all(
        isinstance(s, (Literal,))
        or (isinstance(s, ColumnRef) and expr.desc.columns[s.index].type == desc.columns[k].type)
        for k, s in enumerate(scalars)
    ):
        constant_rows: list[tuple[Datum, ...]] = []
        for row, diff in expr.rows:
            values = tuple(
                s.value if isinstance(s, Literal) else row[s.index]  # type: ignore[attr-defined]
                for s in scalars
            )
            constant_rows.extend([values] * diff)
        return st.Insert(p.src.sql, obj.name, tuple(fit_rows(constant_rows, limits, desc.names)))
    scalars = [fit_expr(x, limits.get(n)) for x, n in zip(scalars, desc.names, strict=True)]
    mapped = Map(expr, tuple(scalars))
    a = expr.desc.arity
    plan = project(mapped, range(a, a + len(scalars)))
    from spate.sql.relops import rename

    return st.Insert(p.src.sql, obj.name, None, rename(plan, list(desc.names)))


def _literal_rows(
    p: StatementPlanner,
    source: exp.Values,
    targets: list[PgType],
    names: list[str],
    columns: list[str],
    defaults: dict[str, ScalarExpr],
) -> list[tuple[Datum, ...]] | None:
    """The rows of ``INSERT … VALUES`` when every value is a constant (converted to its
    column's type as PostgreSQL's assignment does), else ``None``; a column left out or
    given as ``DEFAULT`` takes its default (a default that is not a constant, such as
    ``now()``: ``None``)."""
    constant = {n: d for n, d in defaults.items() if isinstance(d, Literal)}
    binder = ScalarBinder(
        Scope([]), text=p.src.text, dialect=p.src.dialect, clause="VALUES", today=p.qp.today
    )
    out: list[tuple[Datum, ...]] = []
    for row in source.expressions:
        items = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(items) != len(targets):
            more, than = (
                ("expressions", "target columns")
                if len(items) > len(targets)
                else ("target columns", "expressions")
            )
            extra = items[len(targets)] if len(items) > len(targets) else row
            raise SqlError(
                f"INSERT has more {more} than {than}",
                position=position(extra),
                text=p.src.text,
                sqlstate="42601",
            )
        values: dict[str, Datum] = {}
        for name, col, item in zip(columns, targets, items, strict=True):
            if isinstance(item, exp.Var) and item.name.upper() == "DEFAULT":
                continue
            t = binder.coerce(binder.bind(item), col, item, explicit=True)
            if not isinstance(t.expr, Literal):
                return None
            if not isinstance(int_range(t.expr, col.name), Literal):  # integer, smallint
                raise NumericOutOfRange(
                    f"{display_name(col)} out of range", position=position(item), text=p.src.text
                )
            values[name] = t.expr.value
        if any(n not in values and n in defaults and n not in constant for n in names):
            return None  # a default such as now(): evaluated when the row is written
        out.append(tuple(values[n] if n in values else _constant(constant.get(n)) for n in names))
    return out


def _constant(expr: ScalarExpr | None) -> Datum:
    return expr.value if isinstance(expr, Literal) else None


def _defaults(
    p: StatementPlanner, create_sql: str | None, declared: dict[str, PgType]
) -> dict[str, ScalarExpr]:
    """Each column's ``DEFAULT`` (read from the table's ``CREATE TABLE``) bound and converted
    to the column's type as an assignment; evaluated when the row is written."""
    found = column_defaults(create_sql)
    if not found:
        return {}
    binder = ScalarBinder(
        Scope([]), text=create_sql, dialect=p.src.dialect, clause="DEFAULT", today=p.qp.today
    )
    out: dict[str, ScalarExpr] = {}
    for name, node in found.items():
        if name in declared:
            out[name] = assigned(binder, binder.bind(node), declared[name], node, name)
    return out


def plan_update(p: StatementPlanner) -> st.Update:
    node = parse_sql(p.src, p.src.start)
    assert isinstance(node, exp.Update)
    if node.args.get("from") or node.args.get("from_") or node.args.get("returning"):
        raise p.unsupported("UPDATE … FROM / RETURNING is not supported")
    table = node.this
    obj = p.table_object(table.name, table)
    assert obj.desc is not None and obj.id is not None
    desc = obj.desc
    alias = table.alias or table.name
    types = column_types(obj)
    scope = Scope(
        [Col(c.name, alias, t) for c, t in zip(desc.columns, types, strict=True)], None, p.src.text
    )
    plan: RelationExpr = Get(obj.id, desc)
    where = node.args.get("where")
    if where is not None:
        plan = p.filter_where(plan, scope, where.this)
    binder = ScalarBinder(
        scope, text=p.src.text, dialect=p.src.dialect, clause="SET", today=p.qp.today
    )
    new: dict[str, ScalarExpr] = {}
    for assign in node.expressions:
        if not isinstance(assign, exp.EQ) or not isinstance(assign.this, exp.Column):
            raise p.unsupported(f"unsupported SET item {assign.sql()}")
        name = assign.this.name
        if name not in desc.names:
            raise UndefinedColumn(
                f'column "{name}" of relation "{obj.name}" does not exist',
                position=position(assign.this),
                text=p.src.text,
            )
        if name in new:
            raise DuplicateColumn(
                f'multiple assignments to same column "{name}"',
                position=position(assign.this),
                text=p.src.text,
            )
        t = binder.bind(assign.expression)
        value = assigned(binder, t, types[desc.names.index(name)], assign.expression, name)
        new[name] = fit_expr(value, varchar_limits(obj.create_sql).get(name))
    scalars = [new.get(c.name, ColumnRef(i)) for i, c in enumerate(desc.columns)]
    mapped = Map(plan, tuple(scalars))
    return st.Update(p.src.sql, obj.name, mapped, desc.arity)


# --- varchar(n) ----------------------------------------------------------------------------


def fit_varchar(value: Datum, n: int) -> Datum:
    """PostgreSQL's assignment to ``varchar(n)``: trailing spaces beyond ``n`` are cut, any
    other character beyond it is an error."""
    if not isinstance(value, str) or len(value) <= n:
        return value
    if value[n:].strip(" ") == "":
        return value[:n]
    raise StringDataRightTruncation(f"value too long for type character varying({n})")


def fit_rows(
    rows: list[tuple[Datum, ...]], limits: dict[str, int], names: tuple[str, ...]
) -> list[tuple[Datum, ...]]:
    if not limits:
        return rows
    at = [(i, limits[n]) for i, n in enumerate(names) if n in limits]
    out = []
    for row in rows:
        values = list(row)
        for i, n in at:
            values[i] = fit_varchar(values[i], n)
        out.append(tuple(values))
    return out


def assigned(
    binder: ScalarBinder, have: Typed, want: PgType, node: exp.Expression, column: str
) -> ScalarExpr:
    """``have`` converted to column ``column``'s type ``want`` by an assignment (INSERT …
    SELECT, UPDATE): a value the conversion cannot represent fails as a CAST does, instead of
    becoming NULL; a float NaN or infinity into a numeric column fails naming the column
    (spate's numeric has no such values; PostgreSQL keeps NaN)."""
    t = binder.coerce(have, want, node, explicit=True)
    src, out = have.type.scalar, want.scalar
    value = t.expr
    if (
        src is not None
        and out is not None
        and value is not have.expr
        and have.type.name != "unknown"
    ):
        value = strict_cast(value, have.expr, src, out, display_name(want))
        if out.kind is ScalarKind.NUMERIC and src.kind is ScalarKind.FLOAT64:
            nan = CallBinary(BinaryFunc.EQ, have.expr, Literal(math.nan, src))
            infinite = CallBinary(
                BinaryFunc.OR,
                CallBinary(BinaryFunc.EQ, have.expr, Literal(math.inf, src)),
                CallBinary(BinaryFunc.EQ, have.expr, Literal(-math.inf, src)),
            )
            no_nan = f'column "{column}" is numeric, which cannot hold NaN in spate'
            no_inf = f'column "{column}" is numeric, which cannot hold an infinite value'
            value = Case(
                (
                    (nan, RaiseError("0A000", no_nan, out)),
                    (infinite, RaiseError("22003", no_inf, out)),
                ),
                value,
            )
    if have.type.name != want.name:
        value = int_range(value, want.name)  # an integer or smallint column's range
    return value


def fit_expr(x: ScalarExpr, n: int | None) -> ScalarExpr:
    """``x`` assigned to a ``varchar(n)`` column, checked per row (see :func:`fit_varchar`)."""
    if n is None:
        return x
    too_long = CallBinary(BinaryFunc.GT, CallUnary(UnaryFunc.LENGTH, x), Literal(n, INT64))
    spaces_only = CallBinary(
        BinaryFunc.LE,
        CallUnary(UnaryFunc.LENGTH, CallVariadic(VariadicFunc.RTRIM, (x, Literal(" ", TEXT)))),
        Literal(n, INT64),
    )
    cut = CallVariadic(VariadicFunc.SUBSTR, (x, Literal(1, INT64), Literal(n, INT64)))
    error = RaiseError("22001", f"value too long for type character varying({n})", TEXT)
    return Case(((too_long, Case(((spaces_only, cut),), error)),), x)
