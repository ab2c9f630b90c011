"""The functions with fixed signatures among :class:`~spate.plan.expr.VariadicFunc`.

Each takes the argument kinds of one of its signatures and returns the type given here; the
result is NULL when an argument is NULL. The semantics are PostgreSQL's (the reference
evaluator :mod:`spate.testing.reference_scalar` is their definition):

* ``sqrt``, ``cbrt``, ``exp``, ``ln``, ``log10``, ``power`` on float64. A negative ``sqrt``, a
  logarithm of zero or of a negative number, ``0 ^ negative``, ``negative ^ non-integer`` and
  a finite result beyond float64 (overflow, or for ``power`` underflow to zero) are evaluation
  errors. Results may differ from PostgreSQL's libm in the last bit. ``float4(x)`` rounds to
  the nearest single-precision value (PostgreSQL's ``real``); beyond its range, or a nonzero
  value that becomes zero, is an error. ``float4_text(x)`` prints ``x``'s single-precision
  value as PostgreSQL prints a ``real`` (shortest digits, exponent form from ``1e+06``).
  ``int4_range(x)`` / ``int2_range(x)`` are ``x`` where it fits PostgreSQL's ``integer``
  (``smallint``), else the error ``integer out of range`` (``smallint out of range``, 22003):
  the arithmetic of the narrower integer types, done in int64 and checked.
* ``numeric_sqrt``, ``numeric_exp``, ``numeric_ln``, ``numeric_log(base, x)`` and
  ``numeric_power`` on numerics: PostgreSQL's numeric functions, each result rounded to
  PostgreSQL's scale for the value and stored at a static scale (:mod:`spate.plan.numeric_math`).
* Text: ``replace``, ``strpos`` (1-based, 0 when absent), ``lpad``/``rpad`` (to a length,
  truncating a longer text; an empty fill pads nothing), ``split_part`` (a negative field counts
  from the end; field 0 is an error), ``repeat`` (a count below 1 gives ''), ``reverse``,
  ``initcap`` (words are runs of letters and digits), ``md5`` (hex of the UTF-8 bytes),
  ``translate``, ``ascii`` (code point of the first character, 0 for ''), ``chr`` (0, negative
  and beyond U+10FFFF or a surrogate are errors), ``btrim``/``ltrim``/``rtrim`` with a set of
  characters, ``octet_length`` (UTF-8 bytes).
* Regular expressions: ``regexp_like(text, pattern)`` (``~``: a match anywhere),
  ``regexp_replace[_all](text, pattern, replacement)`` replacing the first (every) match; the
  replacement must be a constant, with PostgreSQL's ``\\1`` … ``\\9`` and ``\\&``. Patterns are
  evaluated by the host's engine (Python's ``re``, Java's ``Pattern``): the syntax they share
  with PostgreSQL's (classes, quantifiers, groups, anchors, ``(?i)``) means the same.
* ``make_date(y, m, d)`` (an invalid date is an error), ``add_months(date|timestamp, n)`` (the
  day is clamped to the end of the month, as PostgreSQL's ``+ interval 'n months'``),
  ``to_char(date|timestamp, format)`` with a constant format of the patterns in
  :data:`TO_CHAR_PATTERNS` (other characters are copied; ``"…"`` quotes);
  ``to_char_numeric|int8|int4|float8|float4(number, format)``: PostgreSQL's number formats
  (:mod:`spate.plan.numformat`) with a constant format, each type's own ``to_char``.
"""

from __future__ import annotations

import re
from typing import Final

from spate.plan.expr import VariadicFunc
from spate.plan.interval_funcs import INTERVAL_SIGNATURES
from spate.repr.types import (
    BOOL,
    DATE,
    FLOAT64,
    INT64,
    INTERVAL,
    TEXT,
    ScalarKind,
    ScalarType,
)

K = ScalarKind
V = VariadicFunc

SAME: Final = ScalarType(K.JSONB)
"""Marker result type: the type of the first argument."""
NUMERIC_MATH: Final = ScalarType(K.BYTES)
"""Marker result type: :func:`spate.plan.numeric_math.result_type` of the argument types."""

_F, _I, _T, _N = K.FLOAT64, K.INT64, K.TEXT, K.NUMERIC

SIGNATURES: Final[dict[VariadicFunc, tuple[tuple[tuple[ScalarKind, ...], ...], ScalarType]]] = {
    V.SQRT: (((_F,),), FLOAT64),
    V.CBRT: (((_F,),), FLOAT64),
    V.EXP: (((_F,),), FLOAT64),
    V.LN: (((_F,),), FLOAT64),
    V.LOG10: (((_F,),), FLOAT64),
    V.POWER: (((_F, _F),), FLOAT64),
    V.FLOAT4: (((_F,),), FLOAT64),
    V.FLOAT4_TEXT: (((_F,),), TEXT),
    V.INT4_RANGE: (((_I,),), INT64),
    V.INT2_RANGE: (((_I,),), INT64),
    V.NUMERIC_SQRT: (((_N,),), NUMERIC_MATH),
    V.NUMERIC_EXP: (((_N,),), NUMERIC_MATH),
    V.NUMERIC_LN: (((_N,),), NUMERIC_MATH),
    V.NUMERIC_LOG: (((_N, _N),), NUMERIC_MATH),
    V.NUMERIC_POWER: (((_N, _N),), NUMERIC_MATH),
    V.REPLACE: (((_T, _T, _T),), TEXT),
    V.STRPOS: (((_T, _T),), INT64),
    V.LPAD: (((_T, _I, _T),), TEXT),
    V.RPAD: (((_T, _I, _T),), TEXT),
    V.SPLIT_PART: (((_T, _T, _I),), TEXT),
    V.REPEAT: (((_T, _I),), TEXT),
    V.REVERSE: (((_T,),), TEXT),
    V.INITCAP: (((_T,),), TEXT),
    V.MD5: (((_T,),), TEXT),
    V.TRANSLATE: (((_T, _T, _T),), TEXT),
    V.ASCII: (((_T,),), INT64),
    V.CHR: (((_I,),), TEXT),
    V.BTRIM: (((_T, _T),), TEXT),
    V.LTRIM: (((_T, _T),), TEXT),
    V.RTRIM: (((_T, _T),), TEXT),
    V.OCTET_LENGTH: (((_T,),), INT64),
    V.REGEXP_LIKE: (((_T, _T),), BOOL),
    V.REGEXP_REPLACE: (((_T, _T, _T),), TEXT),
    V.REGEXP_REPLACE_ALL: (((_T, _T, _T),), TEXT),
    V.MAKE_DATE: (((_I, _I, _I),), DATE),
    V.ADD_MONTHS: (((K.DATE, _I), (K.TIMESTAMP, _I)), SAME),
    V.TO_CHAR: (((K.DATE, _T), (K.TIMESTAMP, _T)), TEXT),
    V.TO_CHAR_NUMERIC: (((_N, _T),), TEXT),
    V.TO_CHAR_INT8: (((_I, _T),), TEXT),
    V.TO_CHAR_INT4: (((_I, _T),), TEXT),
    V.TO_CHAR_FLOAT8: (((_F, _T),), TEXT),
    V.TO_CHAR_FLOAT4: (((_F, _T),), TEXT),
    V.MAKE_INTERVAL: (((_I, _I, _I),), INTERVAL),
    V.TIMESTAMP_DIFF_US: (((K.TIMESTAMP, K.TIMESTAMP),), INT64),
    **INTERVAL_SIGNATURES,
}
"""Per function: the argument kinds of each signature, and the result type."""

INT_RANGES: Final[dict[VariadicFunc, tuple[int, str]]] = {
    V.INT4_RANGE: (1 << 31, "integer"),
    V.INT2_RANGE: (1 << 15, "smallint"),
}
"""The narrow integer checks: ``bound`` and the type's name (its values lie in ``[-bound,
bound)``; outside, the error ``<name> out of range``)."""

CONSTANT_ARGS: Final[dict[VariadicFunc, int]] = {
    V.REGEXP_REPLACE: 2,
    V.REGEXP_REPLACE_ALL: 2,
    V.TO_CHAR: 1,
    V.TO_CHAR_NUMERIC: 1,
    V.TO_CHAR_INT8: 1,
    V.TO_CHAR_INT4: 1,
    V.TO_CHAR_FLOAT8: 1,
    V.TO_CHAR_FLOAT4: 1,
}
"""Functions whose argument at this position must be a non-NULL text literal."""

TO_CHAR_NUMBER: Final[dict[VariadicFunc, str]] = {
    V.TO_CHAR_NUMERIC: "numeric",
    V.TO_CHAR_INT8: "int8",
    V.TO_CHAR_INT4: "int4",
    V.TO_CHAR_FLOAT8: "float8",
    V.TO_CHAR_FLOAT4: "float4",
}
"""The number ``to_char`` functions and the PostgreSQL type each formats as."""

REPEAT_LIMIT: Final = 1 << 28
"""The longest text ``repeat``/``lpad``/``rpad`` build (characters); longer is an error."""


# --- regexp_replace's replacement ------------------------------------------------------------

Piece = str | int
"""A piece of a parsed replacement: literal text, or the number of a group (0: the match)."""


def parse_replacement(text: str) -> tuple[Piece, ...]:
    """PostgreSQL's replacement text: ``\\1``…``\\9`` groups, ``\\&`` the match, ``\\\\`` one
    backslash; any other backslash is kept with the character after it."""
    out: list[Piece] = []
    buf: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "123456789&":
                if buf:
                    out.append("".join(buf))
                    buf = []
                out.append(0 if nxt == "&" else int(nxt))
            elif nxt == "\\":
                buf.append("\\")
            else:
                buf.append(ch + nxt)
            i += 2
            continue
        buf.append(ch)
        i += 1
    if buf:
        out.append("".join(buf))
    return tuple(out)


# --- to_char ---------------------------------------------------------------------------------

TO_CHAR_PATTERNS: Final = (
    "YYYY", "YY", "MM", "DD", "DDD", "D", "HH24", "HH12", "HH", "MI", "SS", "MS", "US",
    "AM", "PM", "am", "pm", "Month", "MONTH", "month", "Mon", "MON", "mon",
    "Day", "DAY", "day", "Dy", "DY", "dy", "Q",
)  # fmt: skip
_TOKEN_RE: Final = re.compile(
    '"(?:[^"\\\\]|\\\\.)*"|FM|'
    + "|".join(sorted((re.escape(p) for p in TO_CHAR_PATTERNS), key=len, reverse=True))
)

Token = tuple[str, str]
"""``("lit", text)`` or ``(pattern, "")`` / ``(pattern, "FM")`` (FM: no padding)."""


def parse_to_char(fmt: str) -> tuple[Token, ...]:
    """A ``to_char`` format as literal pieces and field patterns."""
    out: list[Token] = []
    i = 0
    fill_mode = False
    while i < len(fmt):
        m = _TOKEN_RE.match(fmt, i)
        if m is None:
            out.append(("lit", fmt[i]))
            i += 1
            continue
        tok = m.group(0)
        i = m.end()
        if tok == "FM":
            fill_mode = True
            continue
        if tok.startswith('"'):
            out.append(("lit", re.sub(r"\\(.)", r"\1", tok[1:-1])))
        else:
            out.append((tok, "FM" if fill_mode else ""))
        fill_mode = False
    return tuple(out)


def unsupported_to_char(fmt: str) -> str | None:
    """The rest of ``fmt`` from its first unquoted letter that starts no pattern of
    :data:`TO_CHAR_PATTERNS` (PostgreSQL has more: ``WW``, ``IW``, ``J``, ``TZ``, ``th``…),
    or ``None``."""
    i = 0
    while i < len(fmt):
        m = _TOKEN_RE.match(fmt, i)
        if m is not None:
            i = m.end()
            continue
        if fmt[i].isascii() and fmt[i].isalpha():
            return fmt[i:]
        i += 1
    return None


MONTHS: Final = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
DAYS: Final = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
