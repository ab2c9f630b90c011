"""A runner of sqllogictest scripts (SQLite's public SQL corpus) against spate or PostgreSQL.

The format (sqlite.org's sqllogictest): records separated by blank lines, ``#`` comments.

- ``statement ok`` / ``statement error`` + SQL: it must succeed / fail.
- ``query <types> <sort> [label]`` + SQL + ``----`` + the expected values, one per line, or
  ``N values hashing to <md5>`` when there are more than the hash threshold.
- ``skipif <engine>`` / ``onlyif <engine>`` before a record; ``hash-threshold N``; ``halt``.

Values print by their column's type letter: ``I`` an integer (a fractional value truncated
toward zero, as SQLite's ``column_int64``), ``R`` ``%.3f``, ``T`` text (the empty string as
``(empty)``, characters outside printable ASCII as ``@``); ``NULL`` for NULL. ``rowsort``
sorts the rows (as strings, column by column), ``valuesort`` all values, ``nosort`` keeps the
engine's order. The hash is the md5 of the (sorted) values, each followed by a newline.

Every record a file runs for the engine label (``postgresql``) gets one :class:`Outcome`:

- ``pass``;
- ``wrong``: the engine answered, differently from the file (a statement the file says must
  fail succeeded) — the worst outcome: a query an engine cannot run must fail, not answer;
- ``error``: the engine raised; its *cause* is the SQLSTATE, the exception class and the head
  of the message with names and numbers blanked (:func:`cause_of`), so that one gap in the SQL
  layer counts once however many queries it fails.

Records are numbered from 1 in file order, every record counted (also those the engine label
skips): the numbering of ``postgresql-baseline.json`` beside the corpus, which lists the
records PostgreSQL 15 does not pass.

Example::

    with Environment.open(data_dir) as env:
        report = run_file(parse_file(path), EnvironmentEngine(env))
    print(report.passed, report.wrong, report.causes.most_common(5))
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, Protocol

if TYPE_CHECKING:
    from spate.environment.api import Environment

ENGINE_LABEL: Final = "postgresql"
CORPUS_ENV: Final = "SPATE_SLT_CORPUS"
BASELINE_NAME: Final = "postgresql-baseline.json"
_SORTS: Final = ("nosort", "rowsort", "valuesort")
_HASHED = re.compile(r"^(\d+) values hashing to ([0-9a-f]{32})$")

Kind = Literal["pass", "wrong", "error"]


class SltFormatError(ValueError):
    """A script does not follow the format (the message names the file and the line)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One statement or query of a script, with the conditions and the hash threshold in force."""

    number: int  # 1-based, every record of the file counted
    line: int  # 1-based line of its header
    kind: Literal["statement", "query"]
    sql: str
    expect_error: bool = False
    types: str = ""
    sort: str = "nosort"
    label: str = ""
    expected: tuple[str, ...] = ()
    conditions: tuple[tuple[str, str], ...] = ()  # ("skipif" | "onlyif", engine)
    hash_threshold: int = 0

    def runs_on(self, engine: str = ENGINE_LABEL) -> bool:
        """Whether the record applies to ``engine`` (its skipif/onlyif lines)."""
        for condition, name in self.conditions:
            if condition == "skipif" and name == engine:
                return False
            if condition == "onlyif" and name != engine:
                return False
        return True


@dataclass(frozen=True, slots=True)
class Script:
    path: Path
    records: tuple[Record, ...]


def parse_file(path: Path) -> Script:
    """The records of the script at ``path``, up to a ``halt`` that applies to the engine
    label. Raises :class:`SltFormatError` on a malformed record."""
    return parse_text(path.read_text(encoding="utf-8", errors="replace"), path)


def parse_text(text: str, path: Path = Path("<text>")) -> Script:
    lines = text.split("\n")
    records: list[Record] = []
    conditions: list[tuple[str, str]] = []
    threshold = 0
    i = 0
    while i < len(lines):
        words = lines[i].split()
        if not words or words[0].startswith("#"):
            i += 1
            continue
        where = f"{path}:{i + 1}"
        head = words[0]
        if head in ("skipif", "onlyif"):
            if len(words) < 2:
                raise SltFormatError(f"{where}: {head} without an engine")
            conditions.append((head, words[1]))
            i += 1
            continue
        if head == "hash-threshold":
            threshold = int(words[1])
            i += 1
            continue
        if head == "halt":
            if _applies(conditions):
                break
            conditions = []
            i += 1
            continue
        header_line = i + 1
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            body.append(lines[i])
            i += 1
        expected: list[str] = []
        if i < len(lines) and lines[i].strip() == "----":
            i += 1
            while i < len(lines) and lines[i].strip():
                expected.append(lines[i].strip())
                i += 1
        sql = "\n".join(body)
        if not sql.strip():
            raise SltFormatError(f"{where}: a record without SQL")
        base = Record(
            number=len(records) + 1,
            line=header_line,
            kind="statement",
            sql=sql,
            conditions=tuple(conditions),
            hash_threshold=threshold,
        )
        if head == "statement" and len(words) >= 2 and words[1] in ("ok", "error"):
            records.append(replace(base, expect_error=words[1] == "error"))
        elif head == "query" and len(words) >= 2:
            sort = words[2] if len(words) > 2 else "nosort"
            if sort not in _SORTS or not re.fullmatch(r"[IRT]+", words[1]):
                raise SltFormatError(f"{where}: expected 'query <IRT…> nosort|rowsort|valuesort'")
            label = words[3] if len(words) > 3 else ""
            query = replace(base, kind="query", types=words[1], sort=sort, label=label)
            records.append(replace(query, expected=tuple(expected)))
        else:
            raise SltFormatError(f"{where}: unknown record {lines[header_line - 1]!r}")
        conditions = []
    return Script(path, tuple(records))


def _applies(conditions: Sequence[tuple[str, str]]) -> bool:
    return Record(0, 0, "statement", "-", conditions=tuple(conditions)).runs_on()


# -- values ----------------------------------------------------------------------------------------


def format_value(value: object, type_letter: str) -> str:
    """``value`` as sqllogictest prints it in a column of type ``type_letter``."""
    if value is None:
        return "NULL"
    if type_letter == "I":
        return _integer_text(value)
    if type_letter == "R":
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, int | float | Decimal):
            number = float(value)
            return "NULL" if math.isnan(number) else f"{number:.3f}"
        return _text(str(value))
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return format(value, "g") if not value.is_integer() else str(int(value))
    return _text(str(value))


def _integer_text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float | Decimal):
        if isinstance(value, float) and not math.isfinite(value):
            return "0"
        if isinstance(value, Decimal) and not value.is_finite():
            return "0"
        return str(int(value))  # toward zero, as column_int64
    match = re.match(r"\s*[+-]?\d+", str(value))  # text: its leading integer, as atoi
    return str(int(match.group())) if match else "0"


def _text(text: str) -> str:
    if text == "":
        return "(empty)"
    return "".join(c if " " <= c <= "~" else "@" for c in text)


def result_values(rows: Iterable[Sequence[object]], types: str, sort: str) -> list[str]:
    """The flat list of printed values of ``rows``, sorted as ``sort`` says."""
    printed = [
        tuple(format_value(v, types[i] if i < len(types) else "T") for i, v in enumerate(row))
        for row in rows
    ]
    if sort == "rowsort":
        printed.sort()
    values = [v for row in printed for v in row]
    if sort == "valuesort":
        values.sort()
    return values


def values_hash(values: Sequence[str]) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    for v in values:
        digest.update(v.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def matches(record: Record, values: Sequence[str]) -> bool:
    """Whether ``values`` (from :func:`result_values`) are the record's expected result."""
    expected = list(record.expected)
    hashed = _HASHED.match(expected[0]) if len(expected) == 1 else None
    if hashed:
        count, digest = int(hashed.group(1)), hashed.group(2)
        return len(values) == count and values_hash(values) == digest
    if list(values) == expected:
        return True
    # some scripts write a row per line, its values separated by blanks
    width = max(len(record.types), 1)
    rows = [" ".join(values[i : i + width]) for i in range(0, len(values), width)]
    return rows == expected


# -- engines ---------------------------------------------------------------------------------------


class Engine(Protocol):
    """Runs one SQL statement: a query's rows (``None`` for a statement); raises on failure."""

    def run(self, sql: str) -> Sequence[Sequence[object]] | None: ...


class EnvironmentEngine:
    """spate through :meth:`Environment.sql`, as a user's script would run."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def run(self, sql: str) -> Sequence[Sequence[object]] | None:
        import pyarrow as pa

        out = self.env.sql(sql)
        if out is None:
            return None
        if not isinstance(out, pa.Table):
            raise TypeError(f"a statement answered {type(out).__name__}, not rows")
        columns = [c.to_pylist() for c in out.columns]
        if not columns:
            return [() for _ in range(out.num_rows)]
        return list(zip(*columns, strict=True))


class PostgresEngine:
    """PostgreSQL through psycopg, autocommit, in a scratch schema of its own (dropped on
    :meth:`close`): the oracle a runner's comparisons are checked against."""

    def __init__(self, url: str, schema: str) -> None:
        import psycopg

        self.schema = schema
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        self.conn.execute(f"CREATE SCHEMA {schema}")
        self.conn.execute(f"SET search_path TO {schema}")

    def run(self, sql: str) -> Sequence[Sequence[object]] | None:
        cur = self.conn.execute(sql.encode())
        return cur.fetchall() if cur.description is not None else None

    def close(self) -> None:
        try:
            self.conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        finally:
            self.conn.close()


def cause_of(error: BaseException) -> str:
    """An error's cause: SQLSTATE, class and message head, names and numbers blanked."""
    from spate.pgwire.errors import sqlstate_of

    sqlstate = getattr(error, "sqlstate", None) or sqlstate_of(error)
    message = (str(error).strip().splitlines() or [""])[0]
    message = re.sub(r'"[^"]*"', '"…"', message)
    message = re.sub(r"'[^']*'", "'…'", message)
    message = re.sub(r"\d+(\.\d+)?", "N", message)
    return f"{sqlstate} {type(error).__name__}: {message[:90]}"


# -- running ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    record: Record
    kind: Kind
    detail: str = ""  # an error's cause, or what a wrong answer was
    message: str = ""  # an error's full first line


@dataclass
class FileReport:
    """What one engine did with one script (or its first records, ``limit``)."""

    path: Path
    outcomes: list[Outcome] = field(default_factory=list)  # queries only, in file order
    skipped_queries: int = 0
    statements_ok: int = 0
    statements_failed: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    complete: bool = True  # every record ran (no limit cut it short)

    @property
    def queries(self) -> int:
        return len(self.outcomes)

    @property
    def passed(self) -> int:
        return sum(1 for o in self.outcomes if o.kind == "pass")

    @property
    def wrong(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind == "wrong"]

    @property
    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind == "error"]

    @property
    def causes(self) -> Counter[str]:
        return Counter(o.detail for o in self.outcomes if o.kind == "error")


def run_file(
    script: Script,
    engine: Engine,
    *,
    limit: int | None = None,
    observe: Callable[[Outcome, float], None] | None = None,
) -> FileReport:
    """Run ``script``'s records for the engine label in order (the first ``limit`` records of
    the file, if given) and classify each; ``observe`` sees each outcome and its seconds."""
    report = FileReport(script.path)
    started = time.monotonic()
    for record in script.records:
        if limit is not None and record.number > limit:
            report.complete = False
            break
        if not record.runs_on():
            if record.kind == "query":
                report.skipped_queries += 1
            continue
        began = time.monotonic()
        outcome = run_record(record, engine)
        if observe is not None:
            observe(outcome, time.monotonic() - began)
        if record.kind == "query":
            report.outcomes.append(outcome)
        elif outcome.kind == "pass":
            report.statements_ok += 1
        else:
            report.statements_failed.append(outcome)
    report.seconds = time.monotonic() - started
    return report


def run_record(record: Record, engine: Engine) -> Outcome:
    try:
        rows = engine.run(record.sql)
    except Exception as e:  # the engine's failure is the outcome
        if record.kind == "statement" and record.expect_error:
            return Outcome(record, "pass")
        head = (str(e).strip().splitlines() or [""])[0]
        return Outcome(record, "error", cause_of(e), f"{type(e).__name__}: {head[:300]}")
    if record.kind == "statement":
        if record.expect_error:
            return Outcome(record, "wrong", "succeeded; the script says it fails")
        return Outcome(record, "pass")
    if rows is None:
        return Outcome(record, "error", "no rows: the query answered as a statement")
    values = result_values(rows, record.types, record.sort)
    if matches(record, values):
        return Outcome(record, "pass")
    got = values if len(values) <= 8 else [f"{len(values)} values hashing to {values_hash(values)}"]
    return Outcome(record, "wrong", f"got {got}, expected {list(record.expected)}")


# -- the corpus and PostgreSQL's results -----------------------------------------------------------


CI_SLICE: Final = {"index": 60, "random": 300}
"""The test suite's slice of each script: its records up to its N-th query run, N by the
script's folder (``index/`` scripts read through the cluster's replica, ``random/`` ones are
many small reads); ``SPATE_SLT_SLICE_INDEX`` / ``SPATE_SLT_SLICE_RANDOM`` override it
(``all``: the whole script)."""


def slice_end(name: str, script: Script) -> int | None:
    """The number of the last record of ``script``'s slice (:data:`CI_SLICE`; ``name`` is its
    path below the corpus folder), ``None`` for the whole script."""
    kind = name.split("/", 1)[0]
    text = os.environ.get(f"SPATE_SLT_SLICE_{kind.upper()}", str(CI_SLICE[kind]))
    if text.strip().lower() == "all":
        return None
    queries = [r.number for r in script.records if r.kind == "query" and r.runs_on()]
    return queries[int(text) - 1] if len(queries) >= int(text) else None


def corpus_dir(repo_root: Path) -> Path:
    """Where the corpus is: ``$SPATE_SLT_CORPUS``, else the folder ``shared/sqllogictest``
    next to the repository's own folder."""
    given = os.environ.get(CORPUS_ENV)
    return Path(given) if given else repo_root.parent / "shared" / "sqllogictest"


@dataclass(frozen=True, slots=True)
class Baseline:
    """PostgreSQL's results on one script (``postgresql-baseline.json``)."""

    queries: int
    passed: int
    not_passed: frozenset[int]  # record numbers
    seconds: float


def read_baseline(corpus: Path) -> dict[str, Baseline]:
    """Per script (its path below the corpus folder), PostgreSQL's results."""
    data = json.loads((corpus / BASELINE_NAME).read_text())
    return {
        name: Baseline(
            queries=int(f["queries"]),
            passed=int(f["passed"]),
            not_passed=frozenset(int(n) for n in f["not_passed"]),
            seconds=float(f["seconds"]),
        )
        for name, f in data["files"].items()
    }


@dataclass(frozen=True, slots=True)
class Versus:
    """One engine's report measured against PostgreSQL's passes on the same records."""

    postgres_passed: int  # of the queries run, those PostgreSQL passes
    passed: int  # of those, the ones the engine passes too
    wrong: list[Outcome]  # wrong answers where PostgreSQL passes
    wrong_where_postgres_fails: list[Outcome]

    @property
    def ratio(self) -> float:
        return self.passed / self.postgres_passed if self.postgres_passed else 1.0


def versus(report: FileReport, baseline: Baseline) -> Versus:
    pg_ok = [o for o in report.outcomes if o.record.number not in baseline.not_passed]
    return Versus(
        postgres_passed=len(pg_ok),
        passed=sum(1 for o in pg_ok if o.kind == "pass"),
        wrong=[o for o in pg_ok if o.kind == "wrong"],
        wrong_where_postgres_fails=[
            o
            for o in report.outcomes
            if o.kind == "wrong" and o.record.number in baseline.not_passed
        ],
    )
