"""The sqllogictest format of the SQL corpus: parsing, value formatting, rewriting.

A file is a sequence of records separated by blank lines; ``#`` starts a comment line.

- ``statement ok`` + one SQL statement: must succeed.
- ``statement error [regex]`` + one SQL statement: must fail; PostgreSQL's message must match the
  regex (spate's wording is its own, so for spate only the failure is required).
- ``query <types> <sort> [label]`` + SQL + ``----`` + expected rows, one row per line, values
  separated by one space. ``types`` has one letter per column: ``I`` integer, ``R`` numeric or
  float, ``T`` text and everything else (dates, timestamps, bytes), ``B`` boolean (``?`` until the rewrite fills them in). ``sort`` is
  ``rowsort`` (rows compared as a multiset) or ``nosort`` (the query's ORDER BY fixes the order:
  such queries order by enough columns that equal sort keys mean equal rows).
- Conditions on the line(s) before a record: ``skipif <engine>`` / ``onlyif <engine>`` with the
  engines ``postgresql`` and ``spate``, and ``noview`` (the query is not turned into a
  maintained view for the random-change rounds). Each carries its reason after a ``#``.

Values are written as: ``NULL``; ``(empty)`` for the empty string; booleans ``true``/``false``;
integers and numerics as digits (numerics keep PostgreSQL's scale); floats in the shortest form
that reads back exactly (``-0`` for negative zero, ``NaN``, ``Infinity``); dates and timestamps in
ISO form; control characters in text as ``@``; in text with leading or trailing blanks, each
space as ``␣``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

SLT_DIR = Path(__file__).resolve().parent / "slt"
ENGINES = ("postgresql", "spate")
SORTS = ("rowsort", "nosort")


@dataclass
class Record:
    """One statement or query of a file."""

    kind: str  # "statement" or "query"
    sql: str
    line: int  # 1-based line of the record's header
    expect_error: bool = False
    error_regex: str = ""
    types: str = ""
    sort: str = ""
    label: str = ""
    expected: list[str] = field(default_factory=list)
    skipif: list[str] = field(default_factory=list)
    onlyif: list[str] = field(default_factory=list)
    noview: bool = False
    preamble: list[str] = field(default_factory=list)  # comment and condition lines, kept
    occurrence: int = 0  # how many records with the same SQL text come before this one

    def runs_on(self, engine: str) -> bool:
        if engine in self.skipif:
            return False
        return not self.onlyif or engine in self.onlyif

    @property
    def key(self) -> str:
        """A stable id: a hash of the SQL text (whitespace-normalised), not of its position,
        with ``-n`` for the n-th repetition of the same text in a file (reads between writes)."""
        text = " ".join(self.sql.split())
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        return f"{digest}-{self.occurrence}" if self.occurrence else digest


@dataclass
class SltFile:
    path: Path
    records: list[Record]
    trailer: list[str]  # comment lines after the last record

    @property
    def name(self) -> str:
        return self.path.name

    def queries(self) -> list[Record]:
        return [r for r in self.records if r.kind == "query"]


class SltFormatError(ValueError):
    pass


def corpus_files() -> list[Path]:
    return sorted(SLT_DIR.glob("*.slt"))


def parse_file(path: Path) -> SltFile:
    lines = path.read_text().split("\n")
    records: list[Record] = []
    pending: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if stripped.startswith("#") or stripped.split()[0] in ("skipif", "onlyif", "noview"):
            pending.append(line)
            i += 1
            continue
        header, lineno = stripped, i + 1
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            body.append(lines[i])
            i += 1
        expected: list[str] = []
        has_results = i < len(lines) and lines[i].strip() == "----"
        if has_results:
            i += 1
            while i < len(lines) and lines[i].strip():
                expected.append(lines[i])
                i += 1
        record = _record(path, header, lineno, "\n".join(body), expected, has_results)
        _conditions(path, record, pending)
        record.occurrence = sum(1 for r in records if r.sql == record.sql)
        records.append(record)
        pending = []
    return SltFile(path, records, pending)


def _record(
    path: Path, header: str, line: int, sql: str, expected: list[str], has_results: bool
) -> Record:
    where = f"{path.name}:{line}"
    if not sql.strip():
        raise SltFormatError(f"{where}: record without SQL")
    words = header.split(maxsplit=2)
    if words[0] == "statement":
        if has_results:
            raise SltFormatError(f"{where}: a statement has no results")
        if len(words) >= 2 and words[1] == "ok":
            return Record("statement", sql, line)
        if len(words) >= 2 and words[1] == "error":
            regex = words[2] if len(words) > 2 else ""
            return Record("statement", sql, line, expect_error=True, error_regex=regex)
        raise SltFormatError(f"{where}: expected 'statement ok' or 'statement error'")
    if words[0] == "query":
        parts = header.split()
        if len(parts) < 3 or parts[2] not in SORTS or not re.fullmatch(r"[IRTB?]+", parts[1]):
            raise SltFormatError(f"{where}: expected 'query <IRTB...> rowsort|nosort [label]'")
        if not has_results and "?" not in parts[1]:
            raise SltFormatError(f"{where}: a query needs a '----' line and its rows")
        label = parts[3] if len(parts) > 3 else ""
        return Record("query", sql, line, types=parts[1], sort=parts[2], label=label,
                      expected=expected)  # fmt: skip
    raise SltFormatError(f"{where}: unknown record {header!r}")


def _conditions(path: Path, record: Record, pending: list[str]) -> None:
    record.preamble = pending
    for line in pending:
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] in ("skipif", "onlyif"):
            if len(words) != 2 or words[1] not in ENGINES:
                raise SltFormatError(f"{path.name}:{record.line}: bad condition {line!r}")
            if "#" not in line:
                raise SltFormatError(f"{path.name}:{record.line}: {words[0]} needs a # reason")
            getattr(record, words[0]).append(words[1])
        elif words[0] == "noview":
            record.noview = True


# -- values ----------------------------------------------------------------------------------------


def format_value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Decimal):
        return "NaN" if v.is_nan() else (format(v, "f") if v.is_finite() else str(v))
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        text = repr(v)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(v, str):
        if v == "":
            return "(empty)"
        if v != v.strip():
            v = v.replace(" ", "␣")  # keep the row readable and the edges visible
        return "".join(c if c.isprintable() else "@" for c in v)
    if isinstance(v, bytes | bytearray | memoryview):
        return "\\x" + bytes(v).hex()
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v.isoformat()
    if isinstance(v, dt.timedelta):
        return str(v)
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


def format_rows(rows: list[tuple[Any, ...]], sort: str) -> list[str]:
    lines = [" ".join(format_value(v) for v in row) for row in rows]
    return sorted(lines) if sort == "rowsort" else lines


# -- writing ---------------------------------------------------------------------------------------


def render_file(f: SltFile) -> str:
    """The file's text, with each record's expected rows as they are now in ``f``."""
    out: list[str] = []
    for r in f.records:
        out.extend(r.preamble)
        if r.kind == "statement":
            header = "statement error" if r.expect_error else "statement ok"
            if r.expect_error and r.error_regex:
                header += f" {r.error_regex}"
            out.append(header)
            out.append(r.sql)
        else:
            header = f"query {r.types} {r.sort}" + (f" {r.label}" if r.label else "")
            out.append(header)
            out.append(r.sql)
            out.append("----")
            out.extend(r.expected)
        out.append("")
    out.extend(f.trailer)
    text = "\n".join(out).rstrip("\n") + "\n"
    return text
