"""PostgreSQL's math, text, regular-expression and date functions bound to the IR's
fixed-signature functions (:mod:`spate.plan.funcs`).

Arguments convert as PostgreSQL's function resolution does for the common signatures: math
functions take ``double precision`` (a ``numeric`` argument is computed in double precision
and returned as numeric at 16 decimals, where PostgreSQL computes in numeric), text functions
take text, counts and positions take integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.time import format_time

from spate.plan import numeric_math
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Case,
    Cast,
    Literal,
    RaiseError,
    ScalarExpr,
    VariadicFunc,
)
from spate.plan.funcs import TO_CHAR_PATTERNS, unsupported_to_char
from spate.repr.types import BOOL, FLOAT64, INT64, TEXT, numeric
from spate.sql.age import age
from spate.sql.binding import BinderBase, Typed
from spate.sql.errors import FeatureNotSupported, SqlError, UndefinedFunction
from spate.sql.extract import date_part
from spate.sql.interval_ops import justify
from spate.sql.regex import translate_regex
from spate.sql.to_char import FUNCTIONS as NUMBER_TO_CHAR
from spate.sql.to_char import to_char_number
from spate.sql.types import (
    FLOAT8,
    INT4,
    INT8,
    PG_BOOL,
    PG_DATE,
    PG_TEXT,
    PG_TIMESTAMP,
    PgType,
    display_name,
    pg_numeric,
)

V = VariadicFunc
Builtin = Callable[[BinderBase, exp.Expression], Typed]
_NUMERIC_RESULT: Final = numeric(38, 16)


def _call(f: VariadicFunc, *args: ScalarExpr) -> ScalarExpr:
    return CallVariadic(f, args)


def _float_arg(b: BinderBase, node: exp.Expression, what: str) -> tuple[Typed, bool]:
    """The argument as float8, and whether it was a (non-integer) numeric."""
    return _as_float(b, b._bind(node), node, what)


def _as_float(b: BinderBase, t: Typed, node: exp.Expression, what: str) -> tuple[Typed, bool]:
    if t.type.name == "unknown":
        return b.coerce(t, FLOAT8, node), False
    if not t.type.is_numeric:
        raise b.err(
            UndefinedFunction, f"function {what}({display_name(t.type)}) does not exist", node
        )
    was_numeric = t.type.name == "numeric"
    return b.coerce(t, FLOAT8, node, explicit=True), was_numeric


def _text(b: BinderBase, node: exp.Expression) -> ScalarExpr:
    return b.to_text(b._bind(node), node).expr


def _int(b: BinderBase, node: exp.Expression) -> ScalarExpr:
    return b.coerce(b._bind(node), INT8, node).expr


_NUMERIC_FN: Final = {
    V.SQRT: V.NUMERIC_SQRT,
    V.EXP: V.NUMERIC_EXP,
    V.LN: V.NUMERIC_LN,
    V.POWER: V.NUMERIC_POWER,
    V.LOG10: V.NUMERIC_LOG,
}


def _numeric_call(
    b: BinderBase, f: VariadicFunc, args: list[tuple[Typed, exp.Expression]]
) -> Typed | None:
    """PostgreSQL's numeric function ``f`` when it picks it (an argument is numeric, the others
    integers: exact numeric arithmetic, spate.plan.numeric_math), else None."""
    if not any(t.type.name == "numeric" for t, _ in args):
        return None
    if not all(t.type.name == "numeric" or t.type.is_integer for t, _ in args):
        return None
    exprs = [
        t if t.type.name == "numeric" else b.coerce(t, pg_numeric(numeric(19, 0)), n, True)
        for t, n in args
    ]
    g = _NUMERIC_FN[f]
    scalars = [t.type.scalar for t in exprs]
    assert all(s is not None for s in scalars)
    out = numeric_math.result_type(g.value.removeprefix("numeric_"), scalars)  # type: ignore[arg-type]
    return Typed(_call(g, *(t.expr for t in exprs)), pg_numeric(out))


def _math(f: VariadicFunc, what: str) -> Builtin:
    def bind(b: BinderBase, node: exp.Expression) -> Typed:
        nodes = [node.this] + ([node.expression] if f is V.POWER else [])
        bound = [(b._bind(n), n) for n in nodes]
        if f is not V.CBRT:  # cbrt has no numeric form: float8, as in PostgreSQL
            exact = _numeric_call(b, f, bound)
            if exact is not None:
                return exact
        args = [_as_float(b, t, n, what) for t, n in bound]
        value = _call(f, *(t.expr for t, _ in args))
        if f is not V.CBRT and any(was for _, was in args):
            return Typed(Cast(value, _NUMERIC_RESULT), pg_numeric(_NUMERIC_RESULT))
        return Typed(value, FLOAT8)

    return bind


def log_(b: BinderBase, node: exp.Expression) -> Typed:
    """``log(x)`` is the base-10 logarithm; ``log(b, x)`` is ``ln(x) / ln(b)``."""
    if node.expression is None:
        x_t = b._bind(node.this)
        if x_t.type.name == "numeric":  # else log(double precision), as PostgreSQL picks
            ten = Typed(Literal(Decimal(10), numeric(2, 0)), pg_numeric(numeric(2, 0)))
            exact = _numeric_call(b, V.LOG10, [(ten, node), (x_t, node.this)])
            if exact is not None:
                return exact
        t, was = _as_float(b, x_t, node.this, "log")
        one: ScalarExpr = _call(V.LOG10, t.expr)
        if was:
            return Typed(Cast(one, _NUMERIC_RESULT), pg_numeric(_NUMERIC_RESULT))
        return Typed(one, FLOAT8)
    base_t, x_t = b._bind(node.this), b._bind(node.expression)
    exact = _numeric_call(b, V.LOG10, [(base_t, node.this), (x_t, node.expression)])
    if exact is not None:
        return exact
    base, was_b = _as_float(b, base_t, node.this, "log")
    x, was_x = _as_float(b, x_t, node.expression, "log")
    if isinstance(base.expr, Literal) and base.expr.value == 10.0:
        value: ScalarExpr = _call(V.LOG10, x.expr)
    else:
        value = CallBinary(BinaryFunc.DIV, _call(V.LN, x.expr), _call(V.LN, base.expr))
    if was_b or was_x:
        return Typed(Cast(value, _NUMERIC_RESULT), pg_numeric(_NUMERIC_RESULT))
    return Typed(value, FLOAT8)


def pi(b: BinderBase, node: exp.Expression) -> Typed:
    return Typed(Literal(math.pi, FLOAT64), FLOAT8)


def width_bucket(b: BinderBase, node: exp.Expression) -> Typed:
    """PostgreSQL's ``width_bucket(x, low, high, count)`` over double precision; the bounds and
    the count must be constants."""
    x, _ = _float_arg(b, node.this, "width_bucket")
    lo, _ = _float_arg(b, node.args["min_value"], "width_bucket")
    hi, _ = _float_arg(b, node.args["max_value"], "width_bucket")
    count_node = node.args["num_buckets"]
    n = b.coerce(b._bind(count_node), INT8, count_node)
    consts = [lo.expr, hi.expr, n.expr]
    if not all(isinstance(c, Literal) and c.value is not None for c in consts):
        raise b.err(FeatureNotSupported, "width_bucket needs constant bounds and count", node)
    low, high, count = (c.value for c in consts)  # type: ignore[attr-defined]
    assert isinstance(low, float) and isinstance(high, float) and isinstance(count, int)
    if count <= 0:
        raise b.err(SqlError, "count must be greater than zero", count_node)
    if low == high:
        raise b.err(SqlError, "lower bound cannot equal upper bound", node)
    if not (math.isfinite(low) and math.isfinite(high)):
        raise b.err(SqlError, "lower and upper bounds must be finite", node)
    v = x.expr
    f64 = Literal
    if low < high:
        below: ScalarExpr = CallBinary(BinaryFunc.LT, v, f64(low, FLOAT64))
        above: ScalarExpr = CallBinary(BinaryFunc.GE, v, f64(high, FLOAT64))
        frac = CallBinary(
            BinaryFunc.DIV,
            CallBinary(BinaryFunc.SUB, v, f64(low, FLOAT64)),
            f64(high - low, FLOAT64),
        )
    else:
        below = CallBinary(BinaryFunc.GT, v, f64(low, FLOAT64))
        above = CallBinary(BinaryFunc.LE, v, f64(high, FLOAT64))
        frac = CallBinary(
            BinaryFunc.DIV,
            CallBinary(BinaryFunc.SUB, f64(low, FLOAT64), v),
            f64(low - high, FLOAT64),
        )
    scaled = Cast(CallBinary(BinaryFunc.MUL, f64(float(count), FLOAT64), frac), INT64)
    inside = CallBinary(
        BinaryFunc.ADD,
        Case(
            (
                (
                    CallBinary(BinaryFunc.GE, scaled, Literal(count, INT64)),
                    Literal(count - 1, INT64),
                ),
            ),
            scaled,
        ),
        Literal(1, INT64),
    )
    value = Case(
        ((below, Literal(0, INT64)), (above, Literal(count + 1, INT64))),
        inside,
    )
    return Typed(value, INT4)


# --- text ------------------------------------------------------------------------------------


def _text_fn(f: VariadicFunc, *arg_names: str, result: PgType = PG_TEXT) -> Builtin:
    """A function of text arguments ``this`` and the named ones."""

    def bind(b: BinderBase, node: exp.Expression) -> Typed:
        args = [_text(b, node.this)] + [_text(b, node.args[a]) for a in arg_names]
        return Typed(_call(f, *args), result)

    return bind


def strpos(b: BinderBase, node: exp.Expression) -> Typed:
    if node.args.get("position") is not None or node.args.get("occurrence") is not None:
        raise b.err(FeatureNotSupported, "position with a start or occurrence", node)
    return Typed(_call(V.STRPOS, _text(b, node.this), _text(b, node.args["substr"])), INT4)


def pad(b: BinderBase, node: exp.Expression) -> Typed:
    f = V.LPAD if node.args.get("is_left") else V.RPAD
    fill_node = node.args.get("fill_pattern")
    fill = Literal(" ", TEXT) if fill_node is None else _text(b, fill_node)
    return Typed(_call(f, _text(b, node.this), _int(b, node.expression), fill), PG_TEXT)


def split_part(b: BinderBase, node: exp.Expression) -> Typed:
    s, d = _text(b, node.this), _text(b, node.args["delimiter"])
    return Typed(_call(V.SPLIT_PART, s, d, _int(b, node.args["part_index"])), PG_TEXT)


def repeat(b: BinderBase, node: exp.Expression) -> Typed:
    return Typed(_call(V.REPEAT, _text(b, node.this), _int(b, node.args["times"])), PG_TEXT)


def chr_(b: BinderBase, node: exp.Expression) -> Typed:
    args = node.expressions
    if len(args) != 1:
        raise b.err(UndefinedFunction, "chr takes one integer", node)
    return Typed(_call(V.CHR, _int(b, args[0])), PG_TEXT)


def trim(b: BinderBase, node: exp.Expression) -> Typed:
    """``trim([LEADING|TRAILING|BOTH] [chars] FROM s)``, ``btrim``/``ltrim``/``rtrim``."""
    side = str(node.args.get("position") or "BOTH").upper()
    f = {"LEADING": V.LTRIM, "TRAILING": V.RTRIM}.get(side, V.BTRIM)
    chars_node = node.expression
    chars = Literal(" ", TEXT) if chars_node is None else _text(b, chars_node)
    return Typed(_call(f, _text(b, node.this), chars), PG_TEXT)


def _pattern(b: BinderBase, node: exp.Expression, *, replace: bool, icase: bool) -> ScalarExpr:
    """A constant pattern in PostgreSQL's syntax, translated (:mod:`spate.sql.regex`)."""
    pattern = _text(b, node)
    if not isinstance(pattern, Literal):
        raise b.err(FeatureNotSupported, "a regular expression must be a constant", node)
    if not isinstance(pattern.value, str):
        return pattern
    try:
        host = translate_regex(pattern.value, replace=replace, icase=icase)
    except SqlError as e:
        raise b.err(type(e), str(e), node) from None
    return Literal(host, TEXT)


def regexp_like(b: BinderBase, node: exp.Expression) -> Typed:
    icase = isinstance(node, exp.RegexpILike)
    pattern = _pattern(b, node.expression, replace=False, icase=icase)
    return Typed(_call(V.REGEXP_LIKE, _text(b, node.this), pattern), PG_BOOL)


def regexp_replace(b: BinderBase, node: exp.Expression) -> Typed:
    flags = ""
    mod = node.args.get("modifiers")
    if mod is not None:
        bound = b._bind(mod)
        if not isinstance(bound.expr, Literal) or not isinstance(bound.raw, str):
            raise b.err(FeatureNotSupported, "regexp_replace flags must be a constant", mod)
        flags = bound.raw
        if set(flags) - set("gi"):
            raise b.err(FeatureNotSupported, f"regexp_replace flags {flags!r}: only g and i", mod)
    for extra in ("position", "occurrence"):
        if node.args.get(extra) is not None:
            raise b.err(FeatureNotSupported, f"regexp_replace with a {extra}", node)
    rep_node = node.args["replacement"]
    rep = b.to_text(b._bind(rep_node), rep_node).expr
    if not isinstance(rep, Literal) or rep.value is None:
        raise b.err(FeatureNotSupported, "regexp_replace needs a constant replacement", rep_node)
    pattern = _pattern(b, node.expression, replace=True, icase="i" in flags)
    f = V.REGEXP_REPLACE_ALL if "g" in flags else V.REGEXP_REPLACE
    return Typed(_call(f, _text(b, node.this), pattern, rep), PG_TEXT)


# --- time ------------------------------------------------------------------------------------


def to_char(b: BinderBase, node: exp.Expression) -> Typed:
    t = b._bind(node.this)
    if t.type.name == "unknown":
        t = b.coerce(t, PG_TIMESTAMP, node.this)
    if t.type.name in NUMBER_TO_CHAR:
        return to_char_number(b, node, t)
    if t.type.name not in ("date", "timestamp", "timestamptz"):
        raise b.err(
            FeatureNotSupported, f"to_char of {display_name(t.type)} is not supported", node
        )
    fmt = node.args.get("format")
    if not isinstance(fmt, exp.Literal) or not fmt.is_string:
        raise b.err(FeatureNotSupported, "to_char needs a constant format", node)
    dialect = sqlglot.Dialect.get_or_raise("postgres")
    text = format_time(fmt.name, dialect.INVERSE_TIME_MAPPING, dialect.INVERSE_TIME_TRIE)
    rest = unsupported_to_char(text or "")
    if rest is not None:
        raise b.err(
            FeatureNotSupported,
            f"to_char format at {rest!r} is not supported (supported: "
            f"{', '.join(TO_CHAR_PATTERNS)}, FM and quoted text)",
            fmt,
        )
    return Typed(_call(V.TO_CHAR, t.expr, Literal(text or "", TEXT)), PG_TEXT)


def make_date(b: BinderBase, node: exp.Expression) -> Typed:
    args = node.expressions
    if len(args) != 3:
        raise b.err(UndefinedFunction, "make_date takes year, month and day", node)
    return Typed(_call(V.MAKE_DATE, *(_int(b, a) for a in args)), PG_DATE)


def octet_length(b: BinderBase, node: exp.Expression) -> Typed:
    args = node.expressions
    if len(args) != 1:
        raise b.err(UndefinedFunction, "octet_length takes one argument", node)
    return Typed(_call(V.OCTET_LENGTH, _text(b, args[0])), INT4)


def btrim(b: BinderBase, node: exp.Expression) -> Typed:
    """``btrim(s[, chars])`` where the dialect leaves it anonymous (Spark)."""
    args = node.expressions
    if len(args) not in (1, 2):
        raise b.err(UndefinedFunction, "btrim takes a text and the characters to trim", node)
    chars = Literal(" ", TEXT) if len(args) == 1 else _text(b, args[1])
    return Typed(_call(V.BTRIM, _text(b, args[0]), chars), PG_TEXT)


RAISED_SQLSTATE: Final = "P0001"
"""The SQLSTATE of an error ``raise_error`` raises (PostgreSQL's ``raise_exception``)."""


def raise_error(b: BinderBase, node: exp.Expression) -> Typed:
    """Spark's ``raise_error(message)`` (Spark dialect only), evaluated where it is reached:
    inside ``CASE WHEN p THEN raise_error('…') ELSE … END`` only for the rows where ``p``
    holds. ``message`` MUST be a string literal. Spark types the call NULL, which coerces to
    anything; here it is ``boolean``, the one place spate uses it (a row's check,
    :mod:`spate.pipelines.expectations`)."""
    args = node.expressions
    if b.dialect != "spark":
        raise b.err(UndefinedFunction, "function raise_error does not exist", node)
    if len(args) != 1 or not (isinstance(args[0], exp.Literal) and args[0].is_string):
        raise b.err(FeatureNotSupported, "raise_error takes one string literal", node)
    return Typed(RaiseError(RAISED_SQLSTATE, args[0].name, BOOL), PG_BOOL)


FIXED_BUILTINS: Final[dict[type, Builtin]] = {
    exp.JustifyDays: justify,
    exp.JustifyHours: justify,
    exp.JustifyInterval: justify,
    exp.Sqrt: _math(V.SQRT, "sqrt"),
    exp.Cbrt: _math(V.CBRT, "cbrt"),
    exp.Exp: _math(V.EXP, "exp"),
    exp.Ln: _math(V.LN, "ln"),
    exp.Pow: _math(V.POWER, "power"),
    exp.Log: log_,
    exp.Pi: pi,
    exp.WidthBucket: width_bucket,
    exp.Replace: _text_fn(V.REPLACE, "expression", "replacement"),
    exp.StrPosition: strpos,
    exp.Pad: pad,
    exp.SplitPart: split_part,
    exp.Repeat: repeat,
    exp.Reverse: _text_fn(V.REVERSE),
    exp.Initcap: _text_fn(V.INITCAP),
    exp.MD5: _text_fn(V.MD5),
    exp.Translate: _text_fn(V.TRANSLATE, "from_", "to"),
    exp.Ascii: _text_fn(V.ASCII, result=INT4),
    exp.Chr: chr_,
    exp.Trim: trim,
    exp.RegexpLike: regexp_like,
    exp.RegexpILike: regexp_like,
    exp.RegexpReplace: regexp_replace,
    exp.TimeToStr: to_char,
}
"""sqlglot node types bound here."""

ANONYMOUS: Final[dict[str, Builtin]] = {
    "age": age,
    "date_part": date_part,
    "make_date": make_date,
    "octet_length": octet_length,
    "btrim": btrim,
    "raise_error": raise_error,
}
"""Functions sqlglot leaves anonymous, by lower-case name."""
