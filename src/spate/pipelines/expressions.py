"""Spark Connect expressions as Spark SQL text, with the names Spark gives them.

Each :class:`~pyspark.sql.connect.proto.Expression` becomes a Spark SQL expression (Spark's own
function names, literals typed as the DataFrame API types them: ``lit(1)`` an INT, ``lit(1.5)``
a DOUBLE) and the column name Spark would give it unaliased (``sum(amount)``, ``(a + b)``).
spate's SQL layer then plans the text with ``dialect="spark"``, so types, NULLs, integer
division and casts follow Spark's rules there, once. A function that is not deterministic fails
with :class:`~spate.pipelines.errors.NotMaintainable` at its call site.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from spate.pipelines.errors import NotMaintainable

__all__ = [
    "NONDETERMINISTIC",
    "ExprContext",
    "SqlExpr",
    "ident",
    "nondeterministic_call",
    "sort_order_sql",
    "translate_expr",
]

NONDETERMINISTIC: Final = frozenset(
    {
        "rand",
        "randn",
        "random",
        "uuid",
        "shuffle",
        "current_timestamp",
        "current_date",
        "now",
        "localtimestamp",
        "current_time",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "randstr",
        "uniform",
        "first",
        "last",
        "first_value",
        "last_value",
        "any_value",
        "collect_list",
        "collect_set",
    }
)
"""Functions whose result is not a function of their input rows (or, for ``first``/``last``/
``collect_list`` over a group, of their order, which Spark leaves unspecified)."""

_BINARY: Final = {
    "==": "=",
    "!=": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "<=>": "<=>",
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "and": "AND",
    "or": "OR",
    "&": "&",
    "|": "|",
    "^": "^",
}
_TYPES: Final = {
    "null": "VOID",
    "binary": "BINARY",
    "boolean": "BOOLEAN",
    "byte": "TINYINT",
    "short": "SMALLINT",
    "integer": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "STRING",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
}


def ident(name: str) -> str:
    """``name`` as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True, slots=True)
class SqlExpr:
    sql: str
    name: str
    """The column name Spark gives the expression when it is not aliased."""


@dataclass(frozen=True, slots=True)
class ExprContext:
    """What an expression is translated against: its dataset (for errors), ``qualifiers``
    (plan id → the SQL alias of that side of a join), ``where`` the default location."""

    dataset: str
    where: str
    qualifiers: Mapping[int, str]
    resolve_star: Callable[[str | None], list[str]]


def _origin(e: Any, ctx: ExprContext) -> str:
    if e.HasField("common") and e.common.HasField("origin"):
        site = e.common.origin.python_origin.call_site
        if site:
            return str(site)
    return ctx.where


def data_type_sql(t: Any) -> str:
    kind = t.WhichOneof("kind")
    if kind in _TYPES:
        return _TYPES[kind]
    if kind == "decimal":
        d = t.decimal
        return f"DECIMAL({d.precision if d.HasField('precision') else 10}, " + (
            f"{d.scale if d.HasField('scale') else 0})"
        )
    if kind == "unparsed":
        return str(t.unparsed.data_type_string)
    if kind in ("char", "var_char"):
        return "STRING"
    raise NotMaintainable("?", f"type {kind}", "?", "type not supported")


def _literal(lit: Any) -> SqlExpr:
    kind = lit.WhichOneof("literal_type")
    v: Any = getattr(lit, kind) if kind else None
    if kind == "null":
        return SqlExpr("NULL", "NULL")
    if kind == "boolean":
        return SqlExpr("true" if v else "false", "true" if v else "false")
    if kind in ("byte", "short", "integer"):
        cast = {"byte": "TINYINT", "short": "SMALLINT", "integer": None}[kind]
        return SqlExpr(str(v) if cast is None else f"CAST({v} AS {cast})", str(v))
    if kind == "long":
        return SqlExpr(f"CAST({v} AS BIGINT)", str(v))
    if kind in ("float", "double"):
        t = "FLOAT" if kind == "float" else "DOUBLE"
        return SqlExpr(f"CAST({_string(repr(float(v)))} AS {t})", repr(float(v)))
    if kind == "decimal":
        p = lit.decimal.precision if lit.decimal.HasField("precision") else 38
        s = lit.decimal.scale if lit.decimal.HasField("scale") else 18
        return SqlExpr(f"CAST({_string(lit.decimal.value)} AS DECIMAL({p}, {s}))", v.value)
    if kind == "string":
        return SqlExpr(_string(v), str(v))
    if kind == "date":
        d = dt.date(1970, 1, 1) + dt.timedelta(days=int(v))
        return SqlExpr(f"DATE {_string(d.isoformat())}", f"DATE '{d.isoformat()}'")
    if kind in ("timestamp", "timestamp_ntz"):
        ts = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(v))
        return SqlExpr(f"TIMESTAMP {_string(ts.isoformat(sep=' '))}", ts.isoformat(sep=" "))
    raise NotMaintainable("?", f"literal of type {kind}", "?", "not supported")


def translate_expr(e: Any, ctx: ExprContext) -> SqlExpr:
    """``e`` as Spark SQL text; raises :class:`NotMaintainable` for what cannot be kept."""
    try:
        return _expr(e, ctx)
    except NotMaintainable as err:
        if err.dataset == "?":
            raise NotMaintainable(
                ctx.dataset, err.operator, _origin(e, ctx), str(err).rpartition(": ")[2]
            ) from None
        raise


def _expr(e: Any, ctx: ExprContext) -> SqlExpr:
    kind = e.WhichOneof("expr_type")
    if kind == "literal":
        return _literal(e.literal)
    if kind == "unresolved_attribute":
        a = e.unresolved_attribute
        parts = [p.strip("`") for p in a.unparsed_identifier.split(".")]
        name = parts[-1]
        if a.HasField("plan_id") and a.plan_id in ctx.qualifiers:
            return SqlExpr(f"{ident(ctx.qualifiers[a.plan_id])}.{ident(name)}", name)
        return SqlExpr(".".join(ident(p) for p in parts), name)
    if kind == "unresolved_star":
        target = e.unresolved_star.unparsed_target or None
        qual = target[:-2].strip("`") if target else None
        if e.unresolved_star.HasField("plan_id") and e.unresolved_star.plan_id in ctx.qualifiers:
            qual = ctx.qualifiers[e.unresolved_star.plan_id]
        cols = ctx.resolve_star(qual)
        prefix = f"{ident(qual)}." if qual else ""
        return SqlExpr(", ".join(prefix + ident(c) for c in cols), "*")
    if kind == "alias":
        inner = _expr(e.alias.expr, ctx)
        if len(e.alias.name) != 1:
            raise NotMaintainable("?", "a multi-name alias", "?", "not supported")
        return SqlExpr(f"{inner.sql} AS {ident(e.alias.name[0])}", e.alias.name[0])
    if kind == "cast":
        inner = _expr(e.cast.expr, ctx)
        t = e.cast.type_str if e.cast.type_str else data_type_sql(e.cast.type)
        return SqlExpr(f"CAST({inner.sql} AS {t})", f"CAST({inner.name} AS {t.upper()})")
    if kind == "expression_string":
        text = e.expression_string.expression
        _check_sql_functions(text, ctx, _origin(e, ctx))
        return SqlExpr(f"({text})", text)
    if kind == "unresolved_function":
        return _function(e, ctx)
    if kind == "window":
        return _window(e.window, ctx)
    if kind == "sort_order":
        return _sort_order(e.sort_order, ctx)
    raise NotMaintainable(
        ctx.dataset, f"the expression {kind}", _origin(e, ctx), "spate does not translate it"
    )


def _check_sql_functions(text: str, ctx: ExprContext, where: str) -> None:
    import sqlglot

    name = nondeterministic_call(sqlglot.parse_one(text, read="spark"))
    if name is not None:
        raise NotMaintainable(ctx.dataset, f"{name}()", where, "it is not deterministic")


_NAMED_CALLS: Final = {
    "Rand": "rand",
    "Randn": "randn",
    "Uuid": "uuid",
    "CurrentTimestamp": "current_timestamp",
    "CurrentDate": "current_date",
    "CurrentTime": "current_time",
}
"""sqlglot's classes of Spark's functions whose names differ from their class's."""


def nondeterministic_call(tree: Any) -> str | None:
    """The Spark name of the first call in ``tree`` (a sqlglot expression of Spark SQL) of a
    function in :data:`NONDETERMINISTIC`, or ``None``."""
    for node in tree.walk():
        cls = type(node).__name__
        name = node.name.lower() if cls == "Anonymous" else _NAMED_CALLS.get(cls, cls.lower())
        if name in NONDETERMINISTIC:
            return str(name)
    return None


def _function(e: Any, ctx: ExprContext) -> SqlExpr:
    f = e.unresolved_function
    fn = f.function_name
    where = _origin(e, ctx)
    if fn.lower() in NONDETERMINISTIC:
        raise NotMaintainable(
            ctx.dataset,
            f"{fn}()",
            where,
            "it is not deterministic (its result is not a "
            "function of the input rows), so no incremental result can equal Spark's",
        )
    if f.is_user_defined_function:
        raise NotMaintainable(ctx.dataset, f"the UDF {fn}", where, "Python UDFs are opaque")
    args = [_expr(a, ctx) for a in f.arguments]
    if fn in _BINARY and len(args) == 2:
        op = _BINARY[fn]
        return SqlExpr(
            f"({args[0].sql} {op} {args[1].sql})", f"({args[0].name} {op} {args[1].name})"
        )
    if fn == "!" or fn == "not":
        return SqlExpr(f"(NOT {args[0].sql})", f"(NOT {args[0].name})")
    if fn == "negative" and len(args) == 1:
        return SqlExpr(f"(- {args[0].sql})", f"(- {args[0].name})")
    if fn in ("isNull", "isnull"):
        return SqlExpr(f"({args[0].sql} IS NULL)", f"({args[0].name} IS NULL)")
    if fn in ("isNotNull", "isnotnull"):
        return SqlExpr(f"({args[0].sql} IS NOT NULL)", f"({args[0].name} IS NOT NULL)")
    if fn == "in":
        rest = ", ".join(a.sql for a in args[1:])
        names = ", ".join(a.name for a in args[1:])
        return SqlExpr(f"({args[0].sql} IN ({rest}))", f"({args[0].name} IN ({names}))")
    if fn in ("like", "rlike", "ilike") and len(args) == 2:
        op = fn.upper()
        return SqlExpr(
            f"({args[0].sql} {op} {args[1].sql})", f"{fn}({args[0].name}, {args[1].name})"
        )
    if fn == "when":
        parts = []
        for i in range(0, len(args) - 1, 2):
            parts.append(f"WHEN {args[i].sql} THEN {args[i + 1].sql}")
        default = f" ELSE {args[-1].sql}" if len(args) % 2 else ""
        names = " ".join(
            f"WHEN {args[i].name} THEN {args[i + 1].name}" for i in range(0, len(args) - 1, 2)
        )
        dname = f" ELSE {args[-1].name}" if len(args) % 2 else ""
        return SqlExpr(f"CASE {' '.join(parts)}{default} END", f"CASE {names}{dname} END")
    distinct = "DISTINCT " if f.is_distinct else ""
    if fn == "count" and len(args) == 1 and args[0].name == "*":
        return SqlExpr("count(1)", "count(1)")
    arg_sql = ", ".join(a.sql for a in args)
    arg_names = ", ".join(a.name for a in args)
    return SqlExpr(f"{fn}({distinct}{arg_sql})", f"{fn}({distinct}{arg_names})")


def _sort_order(s: Any, ctx: ExprContext) -> SqlExpr:
    child = _expr(s.child, ctx)
    direction = "DESC" if s.direction == 2 else "ASC"
    nulls = {1: " NULLS FIRST", 2: " NULLS LAST"}.get(s.null_ordering, "")
    return SqlExpr(f"{child.sql} {direction}{nulls}", f"{child.name} {direction}{nulls}")


def _boundary(b: Any, ctx: ExprContext, *, lower: bool) -> str:
    kind = b.WhichOneof("boundary")
    if kind == "current_row":
        return "CURRENT ROW"
    if kind == "unbounded":
        return "UNBOUNDED PRECEDING" if lower else "UNBOUNDED FOLLOWING"
    value = _expr(b.value, ctx).sql
    n = value.strip("()")
    if n.startswith("CAST("):
        n = n[5:].split(" AS ")[0]
    if n.startswith("-"):
        return f"{n[1:].strip()} PRECEDING"
    return f"{n} FOLLOWING" if n not in ("0",) else "CURRENT ROW"


def _window(w: Any, ctx: ExprContext) -> SqlExpr:
    fn = _expr(w.window_function, ctx)
    parts = []
    if w.partition_spec:
        parts.append("PARTITION BY " + ", ".join(_expr(p, ctx).sql for p in w.partition_spec))
    if w.order_spec:
        parts.append("ORDER BY " + ", ".join(_sort_order(o, ctx).sql for o in w.order_spec))
    if w.HasField("frame_spec"):
        fr = w.frame_spec
        kind = "ROWS" if fr.frame_type == 1 else "RANGE"
        lo = _boundary(fr.lower, ctx, lower=True)
        hi = _boundary(fr.upper, ctx, lower=False)
        parts.append(f"{kind} BETWEEN {lo} AND {hi}")
    spec = " ".join(parts)
    return SqlExpr(f"{fn.sql} OVER ({spec})", f"{fn.name} OVER ({spec})")


def sort_order_sql(s: Any, ctx: ExprContext) -> str:
    """A ``SortOrder`` (of ``orderBy``) as Spark SQL."""
    return _sort_order(s, ctx).sql
