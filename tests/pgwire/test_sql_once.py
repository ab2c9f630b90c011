"""pgwire reads no SQL itself: no regular expression in the server's modules recognises SQL,
and each statement a client sends is split and tokenized by the SQL layer once on its way
through the session (the engine then plans it)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlglot

import spate.pgwire
import spate.pgwire.split
import spate.sql
from tests.pgwire.fake_engine import FakeEngine

PGWIRE = Path(spate.pgwire.__file__).parent

NOT_SQL: dict[str, str] = {
    "guc.py": "setting values (numbers with units), as PostgreSQL's GUC parser reads them",
}
"""The modules that may use regular expressions, and on what (none of them on statements the
session dispatches)."""


def _regex_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "re" for a in node.names):
            found.append(f"{path.name}:{node.lineno}: import re")
        elif isinstance(node, ast.ImportFrom) and node.module == "re":
            found.append(f"{path.name}:{node.lineno}: from re import")
    return found


def _sqlglot_uses(path: Path) -> list[str]:
    """Imports of sqlglot beyond its token types and its errors (its parser reads SQL)."""
    tree = ast.parse(path.read_text())
    allowed = ("sqlglot.tokenizer_core", "sqlglot.errors")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.startswith("sqlglot") for a in node.names):
            found.append(f"{path.name}:{node.lineno}: import sqlglot")
        elif (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("sqlglot")
            and node.module not in allowed
        ):
            found.append(f"{path.name}:{node.lineno}: from {node.module} import")
    return found


def test_no_sql_parser_in_pgwire() -> None:
    """The server's modules use sqlglot's token types and errors only: no statement (COPY's
    included) is parsed there."""
    found = [use for path in sorted(PGWIRE.glob("*.py")) for use in _sqlglot_uses(path)]
    assert found == []


def test_no_sql_recognising_regular_expressions_in_pgwire() -> None:
    found = [
        use
        for path in sorted(PGWIRE.glob("*.py"))
        if path.name not in NOT_SQL
        for use in _regex_uses(path)
    ]
    assert found == []
    assert all((PGWIRE / name).exists() for name in NOT_SQL), "an allowed module is gone"


@pytest.fixture
def tokenize_count(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each statement text is split into statements by the SQL layer."""
    counts: Counter[str] = Counter()
    real = spate.sql.parse

    def counting(text: str, **kwargs: Any) -> list[spate.sql.Parsed]:
        for parsed in (out := real(text, **kwargs)):
            counts[parsed.sql] += 1
        return out

    monkeypatch.setattr(spate.pgwire.split, "parse_sql", counting)
    return counts


def test_each_statement_is_parsed_once_by_the_session(
    dsn: str, engine: FakeEngine, tokenize_count: Counter[str]
) -> None:
    statements = [
        "BEGIN",
        "SET application_name = 'x'",
        "SHOW application_name",
        "SELECT 1",
        "DECLARE c CURSOR FOR SELECT 1",
        "MOVE 1 IN c",
        "FETCH 1 c",
        "CLOSE c",
        "COMMIT",
    ]
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("; ".join(statements))  # one simple query of them all
        for sql in statements:  # the extended protocol, each on its own
            c.execute(sql)  # type: ignore[call-overload]
    # Once for the simple query's split, once for each Parse (a Bind without values keeps
    # the Parse's tokens); a DECLAREd query keeps the DECLARE's tokens.
    over = {s: n for s, n in tokenize_count.items() if n > 2}
    assert over == {}, over
    assert all(tokenize_count[s] == 2 for s in statements), tokenize_count


def test_each_statement_is_parsed_once_on_its_way_to_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a real environment behind the server, a statement is split and tokenized once in
    all: by the session; the environment runs the session's tokens (``run_parsed``), and the
    transaction statements the session recognised as typed statements
    (``Engine.transaction``)."""
    import uuid

    import spate.environment.sql
    from spate.environment.api import Environment
    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import ServerConfig, ServerThread

    counts: Counter[str] = Counter()
    real = spate.sql.parse

    def counting(text: str, **kwargs: Any) -> list[spate.sql.Parsed]:
        for parsed in (out := real(text, **kwargs)):
            counts[parsed.sql] += 1
        return out

    monkeypatch.setattr(spate.pgwire.split, "parse_sql", counting)
    monkeypatch.setattr(spate.environment.sql, "parse", counting)
    parsed_by_sqlglot: list[str] = []  # a statement's text parsed whole, not by the planner
    real_parse_one = sqlglot.parse_one

    def parse_one(sql: str, *args: Any, **kwargs: Any) -> Any:
        parsed_by_sqlglot.append(sql)
        return real_parse_one(sql, *args, **kwargs)

    monkeypatch.setattr(sqlglot, "parse_one", parse_one)
    t = f"once_{uuid.uuid4().hex[:8]}"
    statements = [
        f"CREATE TABLE {t} (k integer, s text)",
        f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
        f"UPDATE {t} SET s = 'c' WHERE k = 2",
        f"COPY {t} (k, s) FROM STDIN WITH (FORMAT csv)",
        f"COPY (SELECT k, s FROM {t} WHERE k > 2) TO STDOUT WITH CSV HEADER",
        "SET transaction_isolation TO serializable",
        f"SELECT k, s FROM {t} ORDER BY k",
        "BEGIN",
        f"SELECT count(*) FROM {t}",
        "COMMIT",
        "START TRANSACTION",
        f"INSERT INTO {t} VALUES (3, 'd')",
        "SAVEPOINT sp",
        f"INSERT INTO {t} VALUES (4, 'e')",
        "ROLLBACK TO SAVEPOINT sp",
        "RELEASE SAVEPOINT sp",
        "ROLLBACK",
        f"DELETE FROM {t} WHERE k = 1",
        f"DROP TABLE {t}",
    ]
    env = Environment.open(tmp_path / "data")
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as c:
            tags = []
            for sql in statements:
                if sql.startswith("COPY"):
                    with c.cursor() as cur:
                        with cur.copy(sql) as copy:  # type: ignore[arg-type]
                            if "FROM STDIN" in sql:
                                copy.write(b"3,x\n4,y\n")
                            else:
                                copied = b"".join(bytes(b) for b in copy)
                        tags.append(f"COPY {cur.rowcount}")
                    continue
                cur = c.execute(sql)  # type: ignore[call-overload]
                tags.append(cur.statusmessage)
    finally:
        server.close()
        env.close()
    assert tags == [
        "CREATE TABLE", "INSERT 0 2", "UPDATE 1", "COPY 2", "COPY 2", "SET", "SELECT 4",
        "BEGIN", "SELECT 1", "COMMIT",
        "BEGIN", "INSERT 0 1", "SAVEPOINT", "INSERT 0 1", "ROLLBACK", "RELEASE", "ROLLBACK",
        "DELETE 1", "DROP TABLE",
    ]  # fmt: skip
    assert copied == b"k,s\n3,x\n4,y\n"
    assert {s: counts[s] for s in statements} == dict.fromkeys(statements, 1)
    assert sum(counts.values()) == len(statements)  # nothing else split: no text made up
    assert [sql for sql in parsed_by_sqlglot if "COPY" in sql or "SET" in sql] == []


def test_cursors_and_sql_prepared_statements_are_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DECLARE … FOR SELECT, FETCH and MOVE from it, PREPARE … AS SELECT/INSERT, EXECUTE and
    DEALLOCATE, against a real environment: each statement text is split once in all (every
    split in the SQL layer counted), the statements DECLARE and PREPARE carry are never split
    again, and an EXECUTE's arguments are bound into the prepared statement without a text
    being made of them (no ``CAST((arg) AS type)`` reaches sqlglot)."""
    import uuid

    import spate.sql.copy_statement
    from spate.environment.api import Environment
    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import ServerConfig, ServerThread
    from spate.sql.parse import split as real_split

    splits: Counter[str] = Counter()

    def counting_split(text: str, dialect: str = "postgres") -> Any:
        out = real_split(text, dialect)
        for src, _ in out:
            splits[src.sql] += 1
        return out

    monkeypatch.setattr(spate.sql, "split", counting_split)  # spate.sql.parse, everywhere
    monkeypatch.setattr(spate.sql.copy_statement, "split", counting_split)
    by_parse_one: list[str] = []
    by_parse: list[str] = []
    real_parse_one, real_parse = sqlglot.parse_one, sqlglot.parse

    def parse_one(sql: str, *args: Any, **kwargs: Any) -> Any:
        by_parse_one.append(sql)
        return real_parse_one(sql, *args, **kwargs)

    def parse(sql: str, *args: Any, **kwargs: Any) -> Any:
        by_parse.append(sql)
        return real_parse(sql, *args, **kwargs)

    monkeypatch.setattr(sqlglot, "parse_one", parse_one)
    monkeypatch.setattr(sqlglot, "parse", parse)
    t = f"once_{uuid.uuid4().hex[:8]}"
    statements = [
        f"CREATE TABLE {t} (k integer, s text)",
        f"PREPARE ins (integer) AS INSERT INTO {t} VALUES ($1, $2)",
        "EXECUTE ins (1, 'a')",
        "EXECUTE ins (2, 'b' || 'c')",
        "EXECUTE ins ('3', NULL)",
        f"PREPARE sel AS SELECT k, s FROM {t} WHERE k >= $1 ORDER BY k",
        "EXECUTE sel (2)",
        "EXECUTE sel ('1')",
        "BEGIN",
        f"DECLARE c CURSOR FOR SELECT k, s FROM {t} ORDER BY k",
        "FETCH 1 FROM c",
        "MOVE 1 IN c",
        "FETCH ALL FROM c",
        "CLOSE c",
        "COMMIT",
        "DEALLOCATE ins",
        "DEALLOCATE ALL",
        f"DROP TABLE {t}",
    ]
    env = Environment.open(tmp_path / "data")
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
        out = []
        with psycopg.connect(dsn, autocommit=True) as c:
            for sql in statements:
                cur = c.execute(sql)  # type: ignore[call-overload]
                rows = cur.fetchall() if cur.description is not None else None
                out.append((cur.statusmessage, rows))
    finally:
        server.close()
        env.close()
    assert out == [
        ("CREATE TABLE", None),
        ("PREPARE", None),
        ("INSERT 0 1", None),
        ("INSERT 0 1", None),
        ("INSERT 0 1", None),
        ("PREPARE", None),
        ("SELECT 2", [(2, "bc"), (3, None)]),
        ("SELECT 3", [(1, "a"), (2, "bc"), (3, None)]),
        ("BEGIN", None),
        ("DECLARE CURSOR", None),
        ("FETCH 1", [(1, "a")]),
        ("MOVE 1", None),
        ("FETCH 1", [(3, None)]),
        ("CLOSE CURSOR", None),
        ("COMMIT", None),
        ("DEALLOCATE", None),
        ("DEALLOCATE ALL", None),
        ("DROP TABLE", None),
    ]
    assert {s: splits[s] for s in statements} == dict.fromkeys(statements, 1)
    assert sum(splits.values()) == len(statements)  # nothing else split: no text made up
    # the table's CREATE text, as the catalog keeps it (its declared column types), is the
    # only text sqlglot parses whole
    assert [sql for sql in by_parse_one if sql != statements[0]] == []
    # sqlglot reads fragments of the statements as they came (a prepared statement when it
    # is planned, an argument when it is bound), never a text made of them
    assert all(any(text in sql for sql in statements) for text in by_parse), by_parse
    assert not [text for text in by_parse if "CAST" in text or "EXECUTE" in text]
