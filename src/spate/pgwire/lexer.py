"""SQL literals of values (:func:`literal`: a Bind's values become typed literals), and the
comment stripping and parenthesis depths the catalog emulation still uses.

Statements are split, recognised and their ``$n`` found by the SQL layer
(:mod:`spate.pgwire.split`, :mod:`spate.sql.session_statements`), not here. Quoted strings
(``'…'`` with ``''``, ``E'…'`` with backslash escapes), quoted identifiers, dollar-quoted
strings, ``--`` and nested ``/* */`` comments are skipped by :func:`strip_comments` and
:func:`depths`.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import re
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any, Final, overload

_DOLLAR_TAG: Final = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_SPECIAL: Final = re.compile(r"['\"$/-]")
"""Where a quoted or commented span may start (a character class: scanned fast)."""
_DEPTH_STOP: Final = re.compile(r"['\"$/()-]")
"""Where the paren depth may change or a quoted or commented span may start."""
_E_STOP: Final = re.compile(r"[\\']")
_COMMENT_STOP: Final = re.compile(r"/\*|\*/")
_CHUNK: Final = 64 * 1024
"""The most text one regex search looks at: a search holds the GIL, and the session runs
these over a long statement on a worker thread, beside the event loop."""


def _find(pattern: re.Pattern[str], text: str, i: int) -> re.Match[str] | None:
    """``pattern.search(text, i)``, a chunk at a time (every match here is at most 2 long)."""
    n = len(text)
    while i < n:
        end = min(n, i + _CHUNK)
        m = pattern.search(text, i, end)
        if m is not None or end == n:
            return m
        i = end - 1
    return None


def _skip(text: str, i: int) -> int:
    """If a quoted or commented span starts at ``i``, the index after it; else ``i``."""
    c = text[i]
    n = len(text)
    if c == "'":
        escaped = i > 0 and text[i - 1] in "eE" and (i < 2 or not text[i - 2].isalnum())
        j = i + 1
        while True:
            if escaped:
                m = _find(_E_STOP, text, j)
                if m is None:
                    return n
                j = m.start()
                if text[j] == "\\":
                    j += 2
                    continue
            else:
                j = text.find("'", j)
                if j == -1:
                    return n
            if j + 1 < n and text[j + 1] == "'":
                j += 2
                continue
            return j + 1
    if c == '"':
        j = text.find('"', i + 1)
        while j != -1 and j + 1 < n and text[j + 1] == '"':
            j = text.find('"', j + 2)
        return n if j == -1 else j + 1
    if c == "-" and text.startswith("--", i):
        j = text.find("\n", i)
        return n if j == -1 else j + 1
    if c == "/" and text.startswith("/*", i):
        depth, j = 1, i + 2
        while depth:
            m = _find(_COMMENT_STOP, text, j)
            if m is None:
                return n
            depth += 1 if m.group() == "/*" else -1
            j = m.end()
        return j
    if c == "$" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        m = _DOLLAR_TAG.match(text, i)
        if m:
            end = text.find(m.group(0), m.end())
            return n if end == -1 else end + len(m.group(0))
    return i


def _code_spans(text: str) -> Iterator[tuple[int, int]]:
    """Spans of ``text`` outside quotes and comments."""
    i, start, n = 0, 0, len(text)
    while i < n:
        m = _find(_SPECIAL, text, i)
        if m is None:
            break
        i = m.start()
        j = _skip(text, i)
        if j != i:
            if start < i:
                yield start, i
            i = start = j
        else:
            i += 1
    if start < n:
        yield start, n


class Depths(Sequence[int]):
    """The paren depth at each position of a text and one past its end (see :func:`depths`),
    kept as runs: as many entries as the text has parentheses, quotes and comments, however
    long it is (a 10 MiB literal is one run)."""

    __slots__ = ("_length", "_starts", "_values")

    def __init__(self, length: int) -> None:
        self._length = length
        self._starts: list[int] = []
        self._values: list[int] = []

    def _run(self, start: int, value: int) -> None:
        if not self._values or self._values[-1] != value:
            self._starts.append(start)
            self._values.append(value)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._length))]
        if i < 0:
            i += self._length
        if not 0 <= i < self._length:
            raise IndexError(i)
        return self._values[bisect.bisect_right(self._starts, i) - 1]


def depths(sql: str) -> Depths:
    """Paren depth at each character (and one past the end: the depth the text ends at);
    quoted spans count as depth -1 (never top level). Only parentheses, quotes and comments
    are looked at one by one: the text between them is a run found at C speed."""
    n = len(sql)
    out = Depths(n + 1)
    depth, i = 0, 0
    out._run(0, 0)
    while i < n:
        m = _find(_DEPTH_STOP, sql, i)
        if m is None:
            break
        i = m.start()
        out._run(i, depth)
        j = _skip(sql, i)
        if j != i:
            out._run(i, -1)
            out._run(j, depth)
            i = j
            continue
        c = sql[i]
        if c == "(":
            depth += 1
        out._run(i, depth)
        if c == ")":
            depth -= 1
        i += 1
        out._run(i, depth)
    return out


def strip_comments(text: str) -> str:
    """``text`` with comments removed (quoted spans kept)."""
    parts: list[str] = []
    i, start, n = 0, 0, len(text)
    while i < n:
        m = _find(_SPECIAL, text, i)
        if m is None:
            break
        i = m.start()
        j = _skip(text, i)
        if j != i:
            if text.startswith("--", i) or text.startswith("/*", i):
                parts.append(text[start:i])
                parts.append(" ")
            else:
                parts.append(text[start:j])
            i = start = j
        else:
            i += 1
    parts.append(text[start:])
    return "".join(parts)


def literal(value: Any, type_name: str | None = None) -> str:
    """``value`` as a SQL literal, cast to ``type_name`` when one is given."""
    if value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = "TRUE" if value else "FALSE"
    elif isinstance(value, int):
        text = str(value) if value >= 0 else f"({value})"
    elif isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            text = f"'{'NaN' if math.isnan(value) else ('Infinity' if value > 0 else '-Infinity')}'"
            type_name = type_name or "float8"
        else:
            text = repr(value) if value >= 0 else f"({value!r})"
    elif isinstance(value, Decimal):
        text = format(value, "f")
        text = text if not text.startswith("-") else f"({text})"
    elif isinstance(value, bytes):
        text, type_name = "'\\x" + value.hex() + "'", type_name or "bytea"
    elif isinstance(value, dt.datetime):
        text, type_name = f"'{value.isoformat(' ')}'", type_name or "timestamp"
    elif isinstance(value, dt.date):
        text, type_name = f"'{value.isoformat()}'", type_name or "date"
    else:
        text = "'" + str(value).replace("'", "''") + "'"
    return f"CAST({text} AS {type_name})" if type_name else text
