"""Integer settings in milliseconds (``statement_timeout``), parsed and shown as PostgreSQL does.

:func:`parse_ms` accepts what PostgreSQL's ``parse_int`` accepts for a setting whose unit is
milliseconds: an integer (decimal, ``0x`` hexadecimal or ``0`` octal, as ``strtol`` reads it)
or a decimal number, optionally followed by a unit — ``us``, ``ms``, ``s``, ``min``, ``h``,
``d``, case-sensitive, whitespace allowed around it. A fraction is rounded to the next smaller
unit, then to whole milliseconds, half to even (``'1.5s'`` is 1500, ``'2.5'`` is 2). Anything
else is ``22023`` with PostgreSQL's message. :func:`show_ms` is how ``SHOW`` displays
a value: in the largest unit that divides it (``5s``, ``1500ms``, ``90min``), ``0`` as ``0``.
"""

from __future__ import annotations

import math
import re
from typing import Final

from spate.pgwire.errors import PgError

INT_MAX: Final = 2**31 - 1
_UNITS: Final[tuple[tuple[str, float], ...]] = (
    ("d", 86_400_000.0),
    ("h", 3_600_000.0),
    ("min", 60_000.0),
    ("s", 1000.0),
    ("ms", 1.0),
    ("us", 0.001),
)
_SPACE: Final = " \t\n\r\f\v"
_FLOAT: Final = re.compile(r"[ \t\n\r\f\v]*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _strtol(text: str) -> tuple[int | None, int]:
    """C ``strtol(text, &end, 0)``: the value (``None``: no digits) and where it stopped."""
    i = 0
    while i < len(text) and text[i] in _SPACE:
        i += 1
    sign = 1
    if i < len(text) and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    if text[i : i + 2].lower() == "0x" and i + 2 < len(text) and text[i + 2] in _HEX:
        digits, base, i = _HEX, 16, i + 2
    elif text[i : i + 1] == "0":
        digits, base = "01234567", 8
    else:
        digits, base = "0123456789", 10
    start = i
    while i < len(text) and text[i].lower() in digits:
        i += 1
    if i == start:
        return None, 0
    return sign * int(text[start:i], base), i


_HEX: Final = "0123456789abcdef"


def _invalid(name: str, text: str) -> PgError:
    return PgError("22023", f'invalid value for parameter "{name}": "{text}"')


def parse_ms(name: str, text: str) -> int:
    """The milliseconds ``text`` sets setting ``name`` to, in ``0 .. INT_MAX`` (module docs)."""
    value: float | int | None
    value, end = _strtol(text)
    if text[end : end + 1] in (".", "e", "E") or (value is not None and abs(value) >= 2**63):
        m = _FLOAT.match(text)
        if m is None:
            raise _invalid(name, text)
        value, end = float(m.group()), m.end()
        mantissa = re.split("[eE]", m.group())[0]
        if math.isinf(value) or (value == 0 and any(c in "123456789" for c in mantissa)):
            raise _invalid(name, text)  # strtod's ERANGE
    if value is None:
        raise _invalid(name, text)
    rest = text[end:].lstrip(_SPACE)
    if rest:
        n = 0
        while n < min(len(rest), 3) and rest[n] not in _SPACE:
            n += 1
        unit = rest[:n]
        found = next((i for i, (u, _) in enumerate(_UNITS) if u == unit), None)
        if rest[n:].strip(_SPACE) or found is None:
            raise _invalid(name, text)
        value = value * _UNITS[found][1]
        if found + 1 < len(_UNITS):
            smaller = _UNITS[found + 1][1]
            value = round(value / smaller) * smaller
    ms = round(value)
    if not -(2**31) <= ms <= INT_MAX:
        raise _invalid(name, text)
    if ms < 0:
        raise PgError(
            "22023",
            f'{ms} ms is outside the valid range for parameter "{name}" (0 .. {INT_MAX})',
        )
    return ms


def show_ms(ms: int) -> str:
    """``ms`` as ``SHOW`` displays it (module docs)."""
    if ms <= 0:
        return str(ms)
    for unit, size in _UNITS:
        if size >= 1 and ms % int(size) == 0:
            return f"{ms // int(size)}{unit}"
    return f"{ms}ms"  # pragma: no cover - ms divides every value


def timeout_seconds(name: str, text: str) -> float | None:
    """A timeout setting's value in seconds; ``None`` for 0 (no timeout)."""
    ms = parse_ms(name, text)
    return ms / 1000 if ms else None
