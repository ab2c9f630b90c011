"""Running corpus files on the real PostgreSQL server, and rewriting their expected rows from it.

Each file runs in a scratch schema of its own (dropped afterwards), in a session with
``TimeZone = 'UTC'`` and ISO dates. spate-only spellings are translated for PostgreSQL:
``CREATE MATERIALIZED VIEW`` becomes ``CREATE VIEW`` (PostgreSQL's materialized views are
snapshots, spate's are maintained, so a plain view gives the same answers) and ``IN CLUSTER c``
is dropped.

Verify every file:   python -m tests.sql._slt_pg
Regenerate expected: python -m tests.sql._slt_pg --rewrite [files...]
(both read the server from SPATE_TEST_POSTGRES_URL).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
from psycopg.types.string import TextLoader

from tests.sql._slt import Record, SltFile, corpus_files, format_rows, parse_file, render_file

_INT_OIDS = {20, 21, 23}
_REAL_OIDS = {700, 701, 1700}
_BOOL_OID = 16

_MATERIALIZED = re.compile(r"\bMATERIALIZED\s+VIEW\b", re.IGNORECASE)
_IN_CLUSTER = re.compile(r"\bIN\s+CLUSTER\s+\w+", re.IGNORECASE)


def to_postgres(sql: str) -> str:
    """The statement as PostgreSQL spells it (see the module docstring)."""
    return _IN_CLUSTER.sub("", _MATERIALIZED.sub("VIEW", sql))


def letter(type_oid: int) -> str:
    if type_oid in _INT_OIDS:
        return "I"
    if type_oid in _REAL_OIDS:
        return "R"
    if type_oid == _BOOL_OID:
        return "B"
    return "T"


class PgScratch:
    """A connection whose search path is a fresh schema, dropped (with its objects) on exit."""

    def __init__(self, url: str, tag: str) -> None:
        self.url = url
        safe = re.sub(r"\W", "_", tag.lower())[:30]
        self.schema = f"slt_{safe}_{secrets.token_hex(4)}"
        self.conn: psycopg.Connection[Any] | None = None
        self.last_oids: list[int] = []
        """The column type OIDs of the last :meth:`query`."""

    def __enter__(self) -> PgScratch:
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        conn.execute(f"CREATE SCHEMA {self.schema}")
        conn.execute(f"SET search_path TO {self.schema}")
        conn.execute("SET TimeZone TO 'UTC'")
        conn.execute("SET DateStyle TO 'ISO, MDY'")
        conn.execute("SET IntervalStyle TO 'postgres'")
        conn.adapters.register_loader("interval", TextLoader)  # PostgreSQL's text, not timedelta
        conn.execute("SET statement_timeout TO '20s'")
        self.conn = conn
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn, self.conn = self.conn, None
        if conn is None:
            return
        try:
            if conn.closed:  # the server ended the session (another test's restart…): reconnect
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        finally:
            conn.close()

    def execute(self, sql: str) -> None:
        assert self.conn is not None
        self.conn.execute(to_postgres(sql))

    def query(self, sql: str) -> tuple[str, list[str], list[tuple[Any, ...]]]:
        """``(type letters, column names, rows)`` of a row-returning statement."""
        assert self.conn is not None
        cur = self.conn.execute(to_postgres(sql))
        if cur.description is None:
            raise ValueError("the statement returned no rows")
        self.last_oids = [d.type_code for d in cur.description]
        letters = "".join(letter(d.type_code) for d in cur.description)
        names = [d.name for d in cur.description]
        return letters, names, [tuple(r) for r in cur.fetchall()]

    def tables(self) -> list[str]:
        assert self.conn is not None
        rows = self.conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
            (self.schema,),
        ).fetchall()
        return [r[0] for r in rows]


def run_file(f: SltFile, url: str, *, rewrite: bool = False) -> list[str]:
    """Run every record that PostgreSQL runs; return the differences from the file (and, with
    ``rewrite``, set each query's types and expected rows to PostgreSQL's answer)."""
    problems: list[str] = []
    with PgScratch(url, f.path.stem) as pg:
        for r in f.records:
            if not r.runs_on("postgresql"):
                continue
            problem = check_record(pg, r, rewrite=rewrite)
            if problem:
                problems.append(f"{f.name}:{r.line}: {problem}\n    {r.sql}")
    return problems


def check_record(pg: PgScratch, r: Record, *, rewrite: bool = False) -> str | None:
    if r.kind == "statement":
        try:
            pg.execute(r.sql)
        except psycopg.Error as e:
            if not r.expect_error:
                return f"statement failed: {_message(e)}"
            if r.error_regex and not re.search(r.error_regex, _message(e), re.IGNORECASE):
                return f"error {_message(e)!r} does not match {r.error_regex!r}"
            return None
        return "statement succeeded, but an error was expected" if r.expect_error else None
    try:
        letters, _, rows = pg.query(r.sql)
    except (psycopg.Error, ValueError) as e:
        return f"query failed: {_message(e)}"
    got = format_rows(rows, r.sort)
    if rewrite:
        r.types, r.expected = letters, got
        return None
    if letters != r.types:
        return f"column types {letters}, the file says {r.types}"
    if got != r.expected:
        return "rows differ:\n      expected " + repr(r.expected) + "\n      got      " + repr(got)
    return None


def _message(e: Exception) -> str:
    diag = getattr(e, "diag", None)
    primary = getattr(diag, "message_primary", None)
    return str(primary or e).strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rewrite", action="store_true", help="write PostgreSQL's answers")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args(argv)
    url = os.environ.get("SPATE_TEST_POSTGRES_URL")
    if not url:
        print("SPATE_TEST_POSTGRES_URL is not set", file=sys.stderr)
        return 2
    failures = 0
    for path in args.files or corpus_files():
        f = parse_file(path)
        problems = run_file(f, url, rewrite=args.rewrite)
        if args.rewrite:
            path.write_text(render_file(f))
        for p in problems:
            print(p)
        failures += len(problems)
        print(f"{path.name}: {len(f.queries())} queries, {len(problems)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
