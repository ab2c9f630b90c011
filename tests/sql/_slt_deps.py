"""The views (and dropped tables) a corpus query reads, recreated for its maintained view.

The incremental check runs at the end of a file, when the views a query read may have been
replaced or dropped (with the tables under them). While the file is replayed,
:class:`Definitions` records each view-creating statement (the latest definition of each name,
in creation order), the views defined when each query ran, and the rows of each table when a
statement dropped it. For a query's maintained view, :meth:`Definitions.closure` gives the
views it reads, transitively, in creation order, each under a name of its own
(``slt_d<k>_<name>``: a name and its definition at the query's point, so that two queries that
read two definitions of one name each get theirs), and the dropped tables it reads, which the
check recreates with the rows they held when dropped. The query and the views' statements are
rewritten to read the renamed views.

A name is found in SQL as a whole word outside string literals that is neither a column of
something (``x.name``) nor an alias after ``AS``: a CTE or a column that shares a view's name
gets the view too (and renaming all of them is still the same query, but for a column read
without its relation).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.sql._slt import Record

Row = tuple[Any, ...]

_CREATE_VIEW = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:MATERIALIZED\s+)?VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)",
    re.IGNORECASE,
)
_DROP = re.compile(
    r"^\s*DROP\s+(MATERIALIZED\s+VIEW|VIEW|TABLE)\s+(?:IF\s+EXISTS\s+)?(\w+(?:\s*,\s*\w+)*)",
    re.IGNORECASE,
)
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_LITERAL = re.compile(r"'(?:[^']|'')*'")
_WORD = re.compile(r"(?<![.\w])((?:AS\s+)?)([A-Za-z_]\w*)", re.IGNORECASE)


def _words(sql: str) -> set[str]:
    """The lower-cased words of ``sql`` that may name a relation."""
    return {m.group(2).lower() for m in _WORD.finditer(_LITERAL.sub("''", sql)) if not m.group(1)}


def rename(sql: str, names: dict[str, str]) -> str:
    """``sql`` with each relation name in ``names`` (lower-case keys) replaced."""
    if not names:
        return sql
    out: list[str] = []
    at = 0
    for lit in [*_LITERAL.finditer(sql), None]:
        end = lit.start() if lit else len(sql)
        out.append(_WORD.sub(_renamed(names), sql[at:end]))
        if lit:
            out.append(lit.group(0))
            at = lit.end()
    return "".join(out)


def _renamed(names: dict[str, str]) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        alias, word = m.group(1), m.group(2)
        return m.group(0) if alias else names.get(word.lower(), word)

    return sub


@dataclass(frozen=True)
class View:
    name: str  # as the file names it (lower-case)
    statement: str  # the file's CREATE statement


@dataclass
class Closure:
    """What a query's maintained view needs besides the tables the file left in place."""

    sql: str  # the query, reading the renamed views
    views: list[tuple[str, str]]  # (new name, CREATE statement reading renamed views), in order
    tables: list[str]  # dropped tables it reads (the file's names), to recreate


@dataclass
class Definitions:
    views: dict[str, View] = field(default_factory=dict)
    """The latest definition of each view the file created and has not dropped, in creation
    order (a redefinition moves to the end)."""
    tables: dict[str, str] = field(default_factory=dict)  # name -> its last CREATE TABLE
    dropped: dict[str, list[Row]] = field(default_factory=dict)
    """Rows of each table when the file dropped it (PostgreSQL's values)."""
    at_query: dict[str, list[View]] = field(default_factory=dict)  # query key -> views then
    _versions: dict[tuple[str, ...], str] = field(default_factory=dict)

    def dropping(self, r: Record) -> list[str]:
        """The tables ``r`` drops (call before it runs, to keep their rows)."""
        m = _DROP.match(r.sql)
        if not m or m.group(1).upper() != "TABLE":
            return []
        return [n.strip().lower() for n in m.group(2).split(",")]

    def ran(self, r: Record) -> None:
        """Note a record PostgreSQL ran (and was expected to succeed)."""
        if r.kind == "query":
            self.at_query[r.key] = list(self.views.values())
            return
        if r.expect_error:
            return
        if m := _CREATE_VIEW.match(r.sql):
            name = m.group(1).lower()
            self.views.pop(name, None)
            self.views[name] = View(name, r.sql)
        elif m := _CREATE_TABLE.match(r.sql):
            self.tables[m.group(1).lower()] = r.sql
            self.dropped.pop(m.group(1).lower(), None)
        elif (m := _DROP.match(r.sql)) and m.group(1).upper() != "TABLE":
            for name in m.group(2).split(","):
                self.views.pop(name.strip().lower(), None)

    def closure(self, r: Record) -> Closure:
        """The views ``r`` reads (renamed) and the dropped tables under it."""
        defined = {v.name: v for v in self.at_query.get(r.key, [])}
        order = list(defined)
        needed: set[str] = set()
        tables: set[str] = set()
        todo = [r.sql]
        while todo:
            words = _words(todo.pop())
            tables |= words & set(self.dropped)
            for name in sorted(words & set(defined) - needed):
                needed.add(name)
                todo.append(defined[name].statement)
        names: dict[str, str] = {}
        views: list[tuple[str, str]] = []
        for name in sorted(needed, key=order.index):
            statement = defined[name].statement
            # a version: the definition and the versions of the views it reads
            reads = sorted(_words(statement) & set(names))
            key = (statement, *(f"{d}={names[d]}" for d in reads))
            new = self._versions.setdefault(key, f"slt_d{len(self._versions)}_{name}")
            views.append((new, rename(statement, {**names, name: new})))
            names[name] = new
        return Closure(rename(r.sql, names), views, sorted(tables))
