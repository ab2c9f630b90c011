"""Unit tests of the pieces: lexer, statements, types, catalog answers, tags, CLI options."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import pytest

from spate.cli.serve import BadListenAddress, parse_listen
from spate.pgwire import lexer, statements
from spate.pgwire import types as pgt
from spate.pgwire.environment import command_tag, subscribe_query


def test_split_respects_quotes_comments_and_dollar_quotes() -> None:
    text = "SELECT ';' AS a; -- c;\nSELECT $x$ ; $x$ /* ; /* ; */ */; SELECT \"a;b\" FROM t;;"
    assert lexer.split(text) == [
        "SELECT ';' AS a",
        "-- c;\nSELECT $x$ ; $x$ /* ; /* ; */ */",
        'SELECT "a;b" FROM t',
    ]


def test_bind_replaces_parameters_outside_quotes_only() -> None:
    sql = "SELECT '$1', $1, $2 FROM t WHERE x = $1"
    assert lexer.bind(sql, ["7", "'a''b'"]) == "SELECT '$1', 7, 'a''b' FROM t WHERE x = 7"
    assert lexer.literal("it's") == "'it''s'"
    assert lexer.literal(-3) == "(-3)"
    assert lexer.literal(Decimal("1.50"), "numeric") == "CAST(1.50 AS numeric)"
    assert lexer.literal(b"\x00\xff") == "CAST('\\x00ff' AS bytea)"
    assert lexer.literal(dt.date(2020, 1, 2)) == "CAST('2020-01-02' AS date)"
    assert lexer.literal(None) == "NULL" and lexer.literal(True) == "TRUE"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("BEGIN", statements.Begin()),
        ("start transaction isolation level serializable", statements.Begin()),
        ("BEGIN READ ONLY", statements.Begin(read_only=True)),
        ("ROLLBACK TO SAVEPOINT a", statements.Rollback(to_savepoint=True, savepoint="a")),
        ('rollback to "B"', statements.Rollback(to_savepoint=True, savepoint="B")),
        ("SAVEPOINT _pg3_1", statements.NoOp("SAVEPOINT", True, "_pg3_1")),
        ("RELEASE SAVEPOINT S", statements.NoOp("RELEASE", True, "s")),
        ("RELEASE s", statements.NoOp("RELEASE", True, "s")),
        ("SET cluster TO 'c1'", statements.Set("cluster", "c1")),
        ("SET SESSION timezone = utc", statements.Set("timezone", "utc")),
        ("SET TIME ZONE 'UTC'", statements.Set("timezone", "UTC")),
        ("RESET ALL", statements.Set(None, None)),
        ("SHOW transaction isolation level", statements.Show("transaction_isolation")),
        ("SHOW TABLES", None),
        ("SHOW cluster", statements.Show("cluster")),
        ("FETCH FORWARD 5 FROM c WITH (timeout = '1s')", statements.Fetch("c", 5, 1.0)),
        ("FETCH ALL c", statements.Fetch("c", None, None)),
        ('DECLARE "C" CURSOR FOR SUBSCRIBE t', statements.Declare("C", "SUBSCRIBE t")),
        ("COPY t TO STDOUT (FORMAT csv)", statements.Copy("SELECT * FROM t", "csv")),
        ("COPY (SUBSCRIBE t) TO STDOUT", statements.Copy("SUBSCRIBE t", "text")),
        ("SELECT 1", None),
    ],
)
def test_classify(sql: str, expected: object) -> None:
    assert statements.classify(sql) == expected


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


def test_command_tags_and_subscribe_targets() -> None:
    assert command_tag("CREATE MATERIALIZED VIEW v AS SELECT 1") == "CREATE MATERIALIZED VIEW"
    assert command_tag("create or replace view v as select 1") == "CREATE VIEW"
    assert command_tag("INSERT INTO t VALUES (1, 'a'), (2, '(b)')") == "INSERT 0 2"
    assert command_tag("DROP TABLE t CASCADE") == "DROP TABLE"
    assert subscribe_query("SUBSCRIBE TO best WITH (SNAPSHOT = false)") == "best"
    assert (
        subscribe_query("SUBSCRIBE (SELECT a FROM t) AS OF 5") == "(SELECT a FROM t) AS _subscribed"
    )


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:6875") == ("127.0.0.1", 6875)
    assert parse_listen("[::1]:7000") == ("::1", 7000)
    with pytest.raises(BadListenAddress):
        parse_listen("localhost")
