"""Unit tests of the pieces: literals, statements, types, catalog answers, tags, CLI options."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import pytest

from spate.cli.serve import BadListenAddress, parse_listen
from spate.pgwire import literals, statements
from spate.pgwire import types as pgt
from spate.pgwire.binding import Prepared, bind_text
from spate.pgwire.environment import view_query
from spate.pgwire.errors import PgError
from spate.pgwire.split import split_statements
from spate.sql.errors import SqlError
from spate.sql.tags import command_tag


def test_split_respects_quotes_comments_and_dollar_quotes() -> None:
    text = "SELECT ';' AS a; -- c;\nSELECT $x$ ; $x$ /* ; /* ; */ */; SELECT \"a;b\" FROM t;;"
    parts = split_statements(text)
    assert [p.sql for _, p in parts] == [
        "SELECT ';' AS a",
        "SELECT $x$ ; $x$",
        'SELECT "a;b" FROM t',
    ]
    assert [text[start : start + len(p.sql)] for start, p in parts] == [p.sql for _, p in parts]


def test_bind_replaces_parameters_outside_quotes_only() -> None:
    sql = "SELECT '$1', $1, $2 FROM t WHERE x = $1||$2"
    prepared = Prepared(sql, (), parsed=split_statements(sql)[0][1])
    bound = bind_text(prepared, ["7", "'a''b'"], what="bind message")
    assert bound == "SELECT '$1', 7, 'a''b' FROM t WHERE x = 7||'a''b'"
    with pytest.raises(PgError) as e:
        bind_text(prepared, ["7"], what="bind message")
    assert e.value.sqlstate == "08P01"
    assert literals.literal("it's") == "'it''s'"
    assert literals.literal(-3) == "(-3)"
    assert literals.literal(Decimal("1.50"), "numeric") == "CAST(1.50 AS numeric)"
    assert literals.literal(b"\x00\xff") == "CAST('\\x00ff' AS bytea)"
    assert literals.literal(dt.date(2020, 1, 2)) == "CAST('2020-01-02' AS date)"
    assert literals.literal(None) == "NULL" and literals.literal(True) == "TRUE"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("BEGIN", statements.Begin()),
        ("start transaction isolation level serializable", statements.Begin()),
        ("BEGIN READ ONLY", statements.Begin(read_only=True)),
        ("COMMIT", statements.Commit()),
        ("end work", statements.Commit()),
        ("ROLLBACK", statements.Rollback()),
        ("ROLLBACK TO SAVEPOINT a", statements.Rollback(savepoint="a")),
        ('rollback to "B"', statements.Rollback(savepoint="B")),
        ("SAVEPOINT _pg3_1", statements.Savepoint("_pg3_1")),
        ("RELEASE SAVEPOINT S", statements.Release("s")),
        ("RELEASE s", statements.Release("s")),
        ("SET cluster TO 'c1'", statements.Set("cluster", "c1")),
        ("SET SESSION timezone = utc", statements.Set("timezone", "utc")),
        ("SET TIME ZONE 'UTC'", statements.Set("timezone", "UTC")),
        ('SET search_path TO public, "x"', statements.Set("search_path", 'public, "x"')),
        ("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", statements.Set(None, None)),
        ("RESET ALL", statements.Set(None, None)),
        ("RESET statement_timeout", statements.Set("statement_timeout", None)),
        ("SHOW transaction isolation level", statements.Show("transaction_isolation")),
        ("SHOW TABLES", None),
        ("SHOW cluster", statements.Show("cluster")),
        ("SHOW ALL", statements.Show("all")),
        ("FETCH FORWARD 5 FROM c WITH (timeout = '1s')", statements.Fetch("c", 5, "1s")),
        ("FETCH ALL c", statements.Fetch("c", None, None)),
        ("FETCH c", statements.Fetch("c", 1, None)),
        ("MOVE FORWARD 10 IN c", statements.Fetch("c", 10, None, move=True)),
        ("MOVE ALL c", statements.Fetch("c", None, None, move=True)),
        ("CLOSE c", statements.Close("c")),
        ("CLOSE ALL", statements.Close(None)),
        ("DEALLOCATE PREPARE p", statements.Deallocate("p")),
        ("DEALLOCATE ALL", statements.Deallocate(None)),
        ("DISCARD ALL", statements.Discard("ALL")),
        ("LISTEN ch", statements.Listen("ch")),
        ("UNLISTEN *", statements.Listen(None, unlisten=True)),
        ("SELECT 1", None),
        ("INSERT INTO t VALUES (1)", None),
    ],
)
def test_classify(sql: str, expected: object) -> None:
    assert statements.classify(split_statements(sql)[0][1]) == expected


def _carried(sql: str) -> object:
    """A session statement with the statement or arguments it carries as their text."""
    stmt = statements.classify(split_statements(sql)[0][1])
    if isinstance(stmt, statements.Declare):
        return ("DECLARE", stmt.name, stmt.query.sql)
    if isinstance(stmt, statements.Prepare):
        return ("PREPARE", stmt.name, stmt.param_types, stmt.statement.sql)
    assert isinstance(stmt, statements.Execute)
    return ("EXECUTE", stmt.name, stmt.arg_texts)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ('DECLARE "C" CURSOR FOR SUBSCRIBE t', ("DECLARE", "C", "SUBSCRIBE t")),
        ("DECLARE c NO SCROLL CURSOR WITH HOLD FOR SELECT 1 ", ("DECLARE", "c", "SELECT 1")),
        (
            "PREPARE p (int, numeric(10,2)) AS SELECT $1",
            ("PREPARE", "p", ("int", "numeric(10,2)"), "SELECT $1"),
        ),
        ("EXECUTE p (1, 'a,b', f(2, 3))", ("EXECUTE", "p", ("1", "'a,b'", "f(2, 3)"))),
        ("EXECUTE p ( 1 ,\n2 )", ("EXECUTE", "p", ("1", "2"))),
        ("EXECUTE p", ("EXECUTE", "p", ())),
    ],
)
def test_statements_carried_as_they_were_split(sql: str, expected: object) -> None:
    """DECLARE's query, PREPARE's statement and EXECUTE's arguments keep their tokens (their
    places in the text they came in): they are not split again."""
    assert _carried(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "FETCH 5",
        "DECLARE c CURSOR",
        "SET x",
        "CLOSE",
        "DISCARD nothing",
        "PREPARE p AS",
        "EXECUTE p ()",
    ],
)
def test_malformed_session_statements_are_syntax_errors(sql: str) -> None:
    with pytest.raises(SqlError) as e:
        statements.classify(split_statements(sql)[0][1])
    assert e.value.sqlstate == "42601"


def test_float_and_timestamp_text_match_postgresql() -> None:
    assert pgt.float_text(0.1) == "0.1"
    assert pgt.float_text(1e15) == "1e+15"
    assert pgt.float_text(123456.0) == "123456"
    assert pgt.float_text(1.5e-7) == "1.5e-07"
    assert pgt.float_text(float("-inf")) == "-Infinity"
    assert pgt.timestamp_text(dt.datetime(2020, 1, 2, 3, 4, 5, 120000)) == "2020-01-02 03:04:05.12"


@pytest.mark.parametrize(
    "value", ["0", "1.50", "-12345678.9", "0.0001", "10000", "99999999999999999999.12", "-0.5"]
)
def test_numeric_binary_round_trips(value: str) -> None:
    d = Decimal(value)
    raw = pgt.numeric_binary(d)
    assert pgt.decode_param(1700, 1, raw, 1) == d
    assert str(pgt.decode_param(1700, 1, raw, 1)) == str(d)


def test_binary_parameters_decode() -> None:
    assert pgt.decode_param(20, 1, struct.pack("!q", -5), 1) == -5
    assert pgt.decode_param(1114, 1, struct.pack("!q", 86_400_000_000), 1) == dt.datetime(
        2000, 1, 2
    )
    with pytest.raises(pgt.InvalidParameter, match=r"\$2 is not a valid int8"):
        pgt.decode_param(20, 0, b"x", 2)


def test_every_spate_type_has_a_postgresql_type() -> None:
    from spate.repr.arrow import arrow_field
    from spate.repr.desc import Column
    from spate.repr.types import BOOL, BYTES, DATE, FLOAT64, INT64, JSONB, TEXT, TIMESTAMP, numeric

    expected = {BOOL: 16, BYTES: 17, DATE: 1082, FLOAT64: 701, INT64: 20, JSONB: 3802,
                TEXT: 25, TIMESTAMP: 1114, numeric(10, 2): 1700}  # fmt: skip
    for t, oid in expected.items():
        assert pgt.for_field(arrow_field(Column("c", t, True))).oid == oid


def test_command_tags_from_the_statement_tokens() -> None:
    def tag(sql: str, rows: int | None = None) -> str:
        return command_tag(split_statements(sql)[0][1], rows)

    assert tag("CREATE MATERIALIZED VIEW v AS SELECT 1") == "CREATE MATERIALIZED VIEW"
    assert tag("create or replace view v as select 1") == "CREATE VIEW"
    assert tag("INSERT INTO t VALUES (1, 'a'), (2, '(b)')", 2) == "INSERT 0 2"
    assert tag("DROP TABLE t CASCADE") == "DROP TABLE"
    assert tag("CREATE TABLE t AS SELECT 1", 1) == "SELECT 1"
    assert tag('CREATE TABLE "as" (a int)') == "CREATE TABLE"
    assert tag("CREATE UNIQUE INDEX i ON t (a)") == "CREATE INDEX"
    assert tag("ALTER MATERIALIZED VIEW v RENAME TO w") == "ALTER MATERIALIZED VIEW"
    assert tag("UPDATE t SET a = 1", 3) == "UPDATE 3"
    assert view_query("CREATE VIEW v (a) AS SELECT (1) AS a;") == "SELECT (1) AS a"
    assert view_query("CREATE TABLE t (a int)") is None


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:6875") == ("127.0.0.1", 6875)
    assert parse_listen("[::1]:7000") == ("::1", 7000)
    with pytest.raises(BadListenAddress):
        parse_listen("localhost")
