"""PostgreSQL regular expressions (ARE) translated to the host engines' syntax.

spate evaluates patterns with Python's ``re`` (reference, one-off reads) and Java's ``Pattern``
(Spark). The subset they share with PostgreSQL is accepted and rewritten so that it means what
it means in PostgreSQL; a construct whose meaning differs is refused when the query is planned
(:class:`UnsupportedRegex`, 0A000), never answered differently:

* Kept: literals, ``.`` (matches a newline too, as in PostgreSQL), bracket expressions with
  ranges and ``^``, ``* + ? {m} {m,} {m,n}``, groups ``( )``, ``(?: )``, lookahead ``(?= )``
  ``(?! )``, lookbehind ``(?<= )`` ``(?<! )``, ``^``, ``$`` and ``\\A``, ``\\Z`` (the start and
  the end of the whole text), ``\\d`` ``\\D`` (ASCII digits), ``\\s`` ``\\S`` (PostgreSQL's
  white space), ``\\w`` ``\\W`` (Unicode letters, digits and ``_``), ``\\n`` ``\\t`` ``\\r``
  ``\\f`` and a backslash before any other non-alphanumeric character.
* Refused: the escapes ``\\m`` ``\\M`` ``\\y`` ``\\Y`` ``\\b`` ``\\B``, back-references
  ``\\1``…, ``\\x``/``\\u`` code points and every other letter escape; POSIX classes
  ``[[:alpha:]]``, ``[[.x.]]``, ``[[=x=]]`` and any ``[`` or ``&&`` inside brackets; a ``]``
  first in brackets; ``\\D`` ``\\S`` ``\\W`` inside brackets; embedded options ``(?i)`` …,
  named groups and ``***`` directors; ``{`` not starting a bound; possessive quantifiers.
  In ``regexp_replace`` also alternation ``|``, non-greedy quantifiers and quantified groups:
  PostgreSQL picks the longest match where the host engines pick the first alternative.
"""

from __future__ import annotations

import re
from typing import Final

from sqlglot import exp

from spate.plan.expr import CallUnary, CallVariadic, Literal, ScalarExpr, UnaryFunc, VariadicFunc
from spate.repr.types import BOOL, TEXT
from spate.sql.binding import BinderBase, Typed
from spate.sql.errors import FeatureNotSupported, SqlError
from spate.sql.types import PG_BOOL, PG_TEXT

__all__ = ["InvalidRegex", "UnsupportedRegex", "similar_to", "similar_to_regex", "translate_regex"]


class UnsupportedRegex(SqlError):
    sqlstate = "0A000"


class InvalidRegex(SqlError):
    sqlstate = "2201B"


_SPACE_SET: Final = (
    "\\t\\n\\x0b\\f\\r \\u1680\\u2000-\\u2006\\u2008-\\u200a\\u2028\\u2029\\u205f\\u3000"
)
"""PostgreSQL's ``\\s`` (the C library's white space in a UTF-8 database)."""
_END: Final = "(?![\\s\\S])"
"""The end of the whole text (Python's ``$`` also matches before a final newline)."""
_BOUND: Final = re.compile(r"\{[0-9]+(,[0-9]*)?\}")
_OUTSIDE: Final = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "s": f"[{_SPACE_SET}]",
    "S": f"[^{_SPACE_SET}]",
    "w": "\\w",
    "W": "\\W",
    "n": "\\n",
    "t": "\\t",
    "r": "\\r",
    "f": "\\f",
    "A": "\\A",
    "Z": _END,
}
_INSIDE: Final = {
    "d": "0-9", "s": _SPACE_SET, "w": "\\w", "n": "\\n", "t": "\\t", "r": "\\r", "f": "\\f",
}  # fmt: skip
_GROUPS: Final = ("(?:", "(?=", "(?!", "(?<=", "(?<!")


def _refuse(what: str, pattern: str) -> UnsupportedRegex:
    return UnsupportedRegex(
        f"regular expression {pattern!r}: {what} is not supported (its meaning differs from "
        "PostgreSQL's in spate's engines)"
    )


def translate_regex(pattern: str, *, replace: bool = False, icase: bool = False) -> str:
    """``pattern`` (PostgreSQL's syntax) in the syntax Python and Java share, with the same
    meaning; ``replace``: for ``regexp_replace`` (the match found must be PostgreSQL's)."""
    out: list[str] = ["(?is)" if icase else "(?s)"]
    i, n = 0, len(pattern)
    if pattern.startswith("***"):
        raise _refuse("a *** director", pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise _refuse("a trailing backslash", pattern)
            e = pattern[i + 1]
            if e in _OUTSIDE:
                out.append(_OUTSIDE[e])
            elif e.isalnum():
                raise _refuse(f"the escape \\{e}", pattern)
            else:
                out.append("\\" + e)
            i += 2
            continue
        if c == "[":
            i = _bracket(pattern, i, out)
            continue
        if c == "(":
            if pattern.startswith("(?", i):
                group = next((g for g in _GROUPS if pattern.startswith(g, i)), None)
                if group is None:
                    raise _refuse("an embedded option or named group (?…", pattern)
                out.append(group)
                i += len(group)
                continue
        elif c == "$":
            out.append(_END)
            i += 1
            continue
        elif c == "|" and replace:
            raise _refuse("alternation | in regexp_replace", pattern)
        elif c == "{":
            m = _BOUND.match(pattern, i)
            if m is None:
                raise _refuse("a { that does not start a bound {m,n}", pattern)
            _quantified(pattern, i, m.end(), out, replace)
            out.append(m.group(0))
            i = m.end()
            i = _after_quantifier(pattern, i, out, replace)
            continue
        elif c in "*+?":
            _quantified(pattern, i, i + 1, out, replace)
            out.append(c)
            i = _after_quantifier(pattern, i + 1, out, replace)
            continue
        out.append(c)
        i += 1
    host = "".join(out)
    try:
        re.compile(host)
    except re.error as e:
        raise InvalidRegex(f"invalid regular expression: {e.msg}") from None
    return host


def _quantified(pattern: str, start: int, end: int, out: list[str], replace: bool) -> None:
    if replace and start > 0 and pattern[start - 1] == ")" and out and out[-1] == ")":
        raise _refuse("a quantified group in regexp_replace", pattern)


def _after_quantifier(pattern: str, i: int, out: list[str], replace: bool) -> int:
    if i < len(pattern) and pattern[i] == "+":
        raise _refuse("a possessive quantifier", pattern)
    if i < len(pattern) and pattern[i] == "?":
        if replace:
            raise _refuse("a non-greedy quantifier in regexp_replace", pattern)
        out.append("?")
        return i + 1
    return i


def _bracket(pattern: str, i: int, out: list[str]) -> int:
    """Copy the bracket expression at ``i``; the index after it."""
    n = len(pattern)
    out.append("[")
    i += 1
    if i < n and pattern[i] == "^":
        out.append("^")
        i += 1
    if i < n and pattern[i] == "]":
        raise _refuse("a ] first in a bracket expression", pattern)
    while i < n:
        c = pattern[i]
        if c == "]":
            out.append("]")
            return i + 1
        if c == "[":
            raise _refuse("a [ inside a bracket expression (e.g. [[:alpha:]])", pattern)
        if c == "&" and pattern.startswith("&&", i):
            raise _refuse("&& inside a bracket expression", pattern)
        if c == "\\":
            e = pattern[i + 1] if i + 1 < n else ""
            if e in _INSIDE:
                out.append(_INSIDE[e])
            elif e == "" or e.isalnum():
                raise _refuse(f"the escape \\{e} inside a bracket expression", pattern)
            else:
                out.append("\\" + e)
            i += 2
            continue
        out.append(c)
        i += 1
    return n  # unterminated: the engine reports it


_SIMILAR: Final = {"%": ".*", "_": ".", "(": "(?:", ".": "\\.", "^": "\\^", "$": "\\$"}


def similar_to_regex(pattern: str, escape: str = "\\") -> str:
    """``SIMILAR TO``'s pattern as a PostgreSQL regular expression matching the whole text
    (PostgreSQL's own translation): ``%`` any run, ``_`` one character, ``|`` ``*`` ``+``
    ``?`` ``{m,n}`` ``( )`` and brackets as in regular expressions, ``escape`` quotes the
    next character."""
    if len(escape) > 1:
        raise InvalidRegex("invalid escape string: it must be empty or one character")
    out: list[str] = []
    i, n = 0, len(pattern)
    in_bracket = False
    while i < n:
        c = pattern[i]
        if escape and c == escape and not in_bracket:
            if i + 1 >= n:
                raise InvalidRegex("invalid escape string: the pattern ends with the escape")
            e = pattern[i + 1]
            if e == '"':
                raise UnsupportedRegex('SIMILAR TO with the substring marker (escape and ")')
            out.append(e if e.isalnum() else "\\" + e)
            i += 2
            continue
        if in_bracket:
            in_bracket = c != "]"
            out.append(c)
        elif c == "[":
            in_bracket = True
            out.append(c)
        elif c == "\\":
            out.append("\\\\")
        else:
            out.append(_SIMILAR.get(c, c))
        i += 1
    return "^(?:" + "".join(out) + ")$"


def similar_to(b: BinderBase, node: exp.Expression, escape: exp.Expression | None) -> Typed:
    """``s [NOT] SIMILAR TO pattern [ESCAPE e]`` with a constant pattern and escape."""
    value = b.coerce(b._bind(node.this), PG_TEXT, node.this)
    pattern = b.coerce(b._bind(node.expression), PG_TEXT, node.expression).expr
    esc = "\\" if escape is None else b._bind(escape).raw
    if not isinstance(pattern, Literal) or esc is None:
        raise b.err(FeatureNotSupported, "SIMILAR TO needs a constant pattern and escape", node)
    if pattern.value is None:
        return Typed(Literal(None, BOOL), PG_BOOL)
    try:
        host = translate_regex(similar_to_regex(str(pattern.value), esc))
    except SqlError as e:
        raise b.err(type(e), str(e), node) from None
    out: ScalarExpr = CallVariadic(VariadicFunc.REGEXP_LIKE, (value.expr, Literal(host, TEXT)))
    if node.args.get("negate"):
        out = CallUnary(UnaryFunc.NOT, out)
    return Typed(out, PG_BOOL)
