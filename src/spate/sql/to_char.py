"""``to_char(number, format)``: the binding of PostgreSQL's number formats.

Each numeric type has its own ``to_char`` in PostgreSQL (``numeric``, ``bigint``, ``integer``
(and ``smallint``), ``double precision``, ``real``), so the call becomes the plan function of
the argument's type (:data:`spate.plan.funcs.TO_CHAR_NUMBER`). The format must be a constant:
it is parsed here, and its errors are PostgreSQL's, raised when the statement is planned.
"""

from __future__ import annotations

from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.time import format_time

from spate.plan.expr import CallVariadic, Literal, VariadicFunc
from spate.plan.funcs import TO_CHAR_NUMBER
from spate.plan.numformat import NumberFormatError, parse_number_format, refusal
from spate.repr.types import TEXT
from spate.sql.binding import BinderBase, Typed
from spate.sql.errors import FeatureNotSupported, SqlSyntaxError
from spate.sql.types import PG_TEXT

V = VariadicFunc

FUNCTIONS: Final[dict[str, VariadicFunc]] = {
    "numeric": V.TO_CHAR_NUMERIC,
    "int8": V.TO_CHAR_INT8,
    "int4": V.TO_CHAR_INT4,
    "int2": V.TO_CHAR_INT4,
    "float8": V.TO_CHAR_FLOAT8,
    "float4": V.TO_CHAR_FLOAT4,
}
"""The ``to_char`` of each numeric type (``smallint`` is formatted as ``integer``)."""


def raw_format(b: BinderBase, node: exp.Expression) -> str | None:
    """The format argument of the ``to_char`` call ``node`` as written (sqlglot rewrites it
    into strftime codes, which loses the case of letters): the string after the first
    argument in the statement's text, or ``None`` if it cannot be found there."""
    start = (node.meta or {}).get("start")
    if b.text is None or start is None:
        return None
    try:
        tokens = sqlglot.Dialect.get_or_raise("postgres").tokenize(b.text[start:])
    except Exception:
        return None
    depth = 0
    for i, tok in enumerate(tokens):
        name = tok.token_type.name
        if name == "L_PAREN":
            depth += 1
        elif name == "R_PAREN":
            depth -= 1
            if depth <= 0:
                return None
        elif name == "COMMA" and depth == 1:
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            after = tokens[i + 2] if i + 2 < len(tokens) else None
            if nxt is None or nxt.token_type.name != "STRING":
                return None
            if after is None or after.token_type.name != "R_PAREN":
                return None
            return nxt.text
    return None


def to_char_number(b: BinderBase, node: exp.Expression, t: Typed) -> Typed:
    """``to_char(t, format)`` for ``t`` of a numeric type."""
    f = FUNCTIONS[t.type.name]
    fmt = node.args.get("format")
    if not isinstance(fmt, exp.Literal) or not fmt.is_string:
        raise b.err(FeatureNotSupported, "to_char needs a constant format", node)
    text = raw_format(b, node)
    if text is None:
        dialect = sqlglot.Dialect.get_or_raise("postgres")
        text = format_time(fmt.name, dialect.INVERSE_TIME_MAPPING, dialect.INVERSE_TIME_TRIE)
    text = text or ""
    try:
        parsed = parse_number_format(text)
    except NumberFormatError as e:
        if e.unsupported:
            raise b.err(FeatureNotSupported, str(e), fmt) from None
        raise b.err(SqlSyntaxError, str(e), fmt) from None
    refused = refusal(TO_CHAR_NUMBER[f], parsed)
    if refused is not None:
        raise b.err(FeatureNotSupported, refused, fmt)
    return Typed(CallVariadic(f, (t.expr, Literal(text, TEXT))), PG_TEXT)
