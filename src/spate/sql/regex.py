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

from spate.sql.errors import SqlError

__all__ = ["InvalidRegex", "UnsupportedRegex", "translate_regex"]


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
