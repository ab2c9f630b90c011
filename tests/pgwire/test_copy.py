"""COPY … FROM STDIN over the wire: psycopg's ``cursor.copy`` (write_row, raw text and CSV
blocks, binary), asyncpg's ``copy_records_to_table`` and psql's ``\\copy`` against a server on
an Environment (no clusters), each compared with PostgreSQL after the same COPY: the rows read
back, and for a failed COPY the SQLSTATE and that nothing was written."""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

import spate.sql
from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.sql.copy_statement import CopyFrom, CopyOptions, CopyTo
from spate.sql.errors import SqlError
from spate.sql.session_statements import recognise

pytestmark = pytest.mark.integration

Conn = psycopg.Connection[tuple[Any, ...]]

COLUMNS = (
    "k bigint PRIMARY KEY, i integer, s text, n numeric(10,2), f double precision, "
    "b boolean, d date, ts timestamp, y bytea"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    env = Environment.open(tmp_path_factory.mktemp("copy") / "data")
    s = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield s
    finally:
        s.close()
        env.close()


@pytest.fixture(scope="module")
def spate_dsn(server: ServerThread) -> str:
    return f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"


@pytest.fixture
def both(spate_dsn: str, postgres_url: str) -> Iterator[tuple[list[tuple[str, Conn]], str]]:
    """Connections to spate and to PostgreSQL (autocommit), each with a fresh table ``t_<id>``
    of :data:`COLUMNS`, dropped after."""
    table = f"t_{uuid.uuid4().hex[:8]}"
    conns = [
        ("spate", psycopg.connect(spate_dsn, autocommit=True)),
        ("postgres", psycopg.connect(postgres_url, autocommit=True)),
    ]
    for _, c in conns:
        c.execute(f"CREATE TABLE {table} ({COLUMNS})")
    yield conns, table
    for _, c in conns:
        if c.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            c.execute("ROLLBACK")
        c.execute(f"DROP TABLE IF EXISTS {table}")
        c.close()


def _copy(
    c: Conn,
    sql: str,
    *,
    data: tuple[str, ...] = (),
    rows: tuple[tuple[Any, ...], ...] = (),
    fail: str | None = None,
) -> int:
    """Run ``sql`` (a COPY FROM STDIN) sending ``rows`` (write_row) then ``data`` (raw);
    with ``fail``, raise it inside the copy (psycopg then sends CopyFail)."""
    with c.cursor() as cur:
        with cur.copy(sql) as copy:
            for r in rows:
                copy.write_row(r)
            for d in data:
                copy.write(d)
            if fail is not None:
                raise RuntimeError(fail)
        return cur.rowcount


def _rows(c: Conn, table: str) -> list[tuple[Any, ...]]:
    return sorted(c.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def _same(conns: list[tuple[str, Conn]], table: str) -> list[tuple[Any, ...]]:
    got = {name: _rows(c, table) for name, c in conns}
    assert got["spate"] == got["postgres"]
    return got["spate"]


ROWS: list[tuple[Any, ...]] = [
    (1, 10, "plain", Decimal("1.50"), 0.1, True, dt.date(2024, 2, 29),
     dt.datetime(2024, 1, 2, 3, 4, 5, 600000), b"\x00\x01\xff"),
    (2, None, "tab\there\nnew line \\ backslash", Decimal("-3.00"), -2.5e10, False,
     dt.date(1999, 12, 31), dt.datetime(2000, 1, 1), b""),
    (3, -7, "", None, None, None, None, None, None),
    (4, 2**31 - 1, "ünïcødé \N{SNOWMAN}", Decimal("99999999.99"), float("inf"), True,
     dt.date(1970, 1, 1), dt.datetime(1969, 7, 20, 20, 17, 40), b"\\x"),
]  # fmt: skip


@pytest.mark.parametrize("fmt", ["text", "binary"])  # write_row has no CSV
def test_write_row_as_postgresql(both: tuple[list[tuple[str, Conn]], str], fmt: str) -> None:
    conns, table = both
    for _, c in conns:
        with c.cursor() as cur:
            with cur.copy(f"COPY {table} FROM STDIN WITH (FORMAT {fmt})") as copy:
                if fmt == "binary":
                    copy.set_types(
                        ["int8", "int4", "text", "numeric", "float8", "bool", "date",
                         "timestamp", "bytea"]
                    )  # fmt: skip
                for row in ROWS:
                    copy.write_row(row)
            assert cur.rowcount == len(ROWS)
    assert _same(conns, table) == sorted(ROWS, key=repr)


def test_raw_text_block_escapes(both: tuple[list[tuple[str, Conn]], str]) -> None:
    conns, table = both
    data = (
        "1\t\\N\ta\\tb\\nc\\\\d\\101\\x42\\e\t1.5\t1e3\tt\t2020-01-01\t2020-01-01 10:00:00\t\\\\x41\n"
        "2\t5\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\n"
        "3\t6\ttrailing\t0\t-Infinity\toff\t0001-01-01\t2020-02-29 23:59:59.999999\t\\\\x\n"
    )
    for _, c in conns:
        with c.cursor() as cur:
            with cur.copy(f"COPY {table} FROM STDIN") as copy:
                for i in range(0, len(data), 7):  # split anywhere, even inside an escape
                    copy.write(data[i : i + 7])
            assert cur.rowcount == 3
    rows = _same(conns, table)
    assert rows[0][2] == "a\tb\nc\\dABe"


def test_raw_csv_block_header_and_quotes(both: tuple[list[tuple[str, Conn]], str]) -> None:
    conns, table = both
    data = (
        "k,i,s,n,f,b,d,ts,y\n"
        '1,,"a, ""quoted""\nmulti-line",1.25,2,true,2021-03-04,2021-03-04 05:06:07,\n'
        '2,3,"",,,,,,\n'
        "3,4,plain,-1,-0.5,f,2021-03-05,2021-03-05 00:00:00,\\x00ff\n"
    )
    for _, c in conns:
        with c.cursor() as cur:
            with cur.copy(f"COPY {table} FROM STDIN WITH (FORMAT csv, HEADER)") as copy:
                copy.write(data[:40])
                copy.write(data[40:])
            assert cur.rowcount == 3
    rows = _same(conns, table)
    assert rows[0][2] == 'a, "quoted"\nmulti-line' and rows[1][2] == "" and rows[1][3] is None


def test_old_syntax_column_list_and_options(both: tuple[list[tuple[str, Conn]], str]) -> None:
    conns, table = both
    for _, c in conns:
        with c.cursor() as cur:
            with cur.copy(f"COPY {table} (s, k) FROM STDIN WITH CSV HEADER") as copy:
                copy.write("s,k\nx,1\n,2\n")
            with cur.copy(
                f"COPY {table} (k, s) FROM STDIN WITH (DELIMITER '|', NULL 'nil')"
            ) as copy:
                copy.write("3|nil\n4|a|b\n".replace("|a|b", "|a"))
            with cur.copy(
                f"COPY {table} (k, s) FROM STDIN WITH (FORMAT csv, QUOTE '''', ESCAPE '\\')"
            ) as copy:
                copy.write("5,'it\\'s, ok'\n")
    _same(conns, table)


BAD = {
    "bad integer in row 3": ("1\tx\n2\ty\n3\tz\n", "1\t1\n2\t2\n3\tzz\n", "22P02"),
    "missing column": ("1\t1\n2\n", "1\t1\n2\n", "22P04"),
    "extra column": ("1\t1\n2\t2\t2\n", "1\t1\n2\t2\t2\n", "22P04"),
    "duplicate key": ("1\t1\n2\t2\n1\t3\n", "1\t1\n2\t2\n1\t3\n", "23505"),
    "null key": ("1\t1\n\\N\t2\n", "1\t1\n\\N\t2\n", "23502"),
    "integer out of range": ("1\t1\n", "1\t1\n2\t3000000000\n", "22003"),
    "bad integer in a plain block": ("1\t1\n", "1\t1\n2\t2.5\n3\t3\n", "22P02"),
    "numeric overflow": ("1\t1\n", "1\t1.5\n2\t123456789.001\n", "22003"),
    "bad date": ("1\t1\n", "1\t2020-01-01\n2\tnot a date\n", "22007"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_copy_writes_nothing(both: tuple[list[tuple[str, Conn]], str], case: str) -> None:
    conns, table = both
    _, data, sqlstate = BAD[case]
    columns = {"bad date": "(k, d)", "numeric overflow": "(k, n)"}.get(case, "(k, i)")
    for name, c in conns:
        c.execute(f"INSERT INTO {table} (k, s) VALUES (100, 'before')")
        with pytest.raises(psycopg.Error) as err:
            _copy(c, f"COPY {table} {columns} FROM STDIN", data=(data,))
        assert err.value.sqlstate == sqlstate, (name, err.value)
        assert [r[0] for r in _rows(c, table)] == [100], name
        c.execute(f"INSERT INTO {table} (k, s) VALUES (101, 'after')")  # still usable
    _same(conns, table)


def test_values_as_postgresql_reads_them(both: tuple[list[tuple[str, Conn]], str]) -> None:
    """numeric rounded to its scale, float and boolean spellings, spaces around numbers."""
    conns, table = both
    data = "1\t1.555\tInfinity\tyes\n2\t -2.345\t 1e-3\t0\n3\t7\t-inf\tOFF\n"
    for _, c in conns:
        _copy(c, f"COPY {table} (k, n, f, b) FROM STDIN", data=(data,))
    assert [r[3] for r in _same(conns, table)] == [
        Decimal("1.56"),
        Decimal("-2.35"),
        Decimal("7.00"),
    ]


@pytest.mark.parametrize("null_at", [None, 2500])
def test_many_plain_rows(
    both: tuple[list[tuple[str, Conn]], str], monkeypatch: pytest.MonkeyPatch, null_at: int | None
) -> None:
    """Lines without escapes or NULLs: split a block at a time, kept as Arrow arrays every
    few hundred rows, and cast by Arrow; with a NULL late on, the row path over the arrays."""
    from spate.pgwire import copy

    monkeypatch.setattr(copy, "SPILL_ROWS", 300)
    conns, table = both
    data = "".join(
        f"{k}\t{k % 1000 - 500}\t{'value' if k != null_at else chr(92) + 'N'}\t{k / 7}\n"
        for k in range(3000)
    )
    for _, c in conns:
        n = _copy(c, f"COPY {table} (k, i, s, f) FROM STDIN", data=(data[:5000], data[5000:]))
        assert n == 3000
    assert len(_same(conns, table)) == 3000


def test_copy_fail_writes_nothing(both: tuple[list[tuple[str, Conn]], str]) -> None:
    conns, table = both
    for name, c in conns:
        with pytest.raises(RuntimeError):
            _copy(c, f"COPY {table} (k) FROM STDIN", rows=((1,),), fail="client gave up")
        assert _rows(c, table) == [], name
        c.execute(f"INSERT INTO {table} (k) VALUES (2)")  # the connection goes on
        assert [r[0] for r in _rows(c, table)] == [2], name


def test_copy_in_a_transaction_block(both: tuple[list[tuple[str, Conn]], str]) -> None:
    conns, table = both
    for _, c in conns:
        c.execute("BEGIN")
        with c.cursor().copy(f"COPY {table} (k, s) FROM STDIN") as copy:
            copy.write_row((1, "rolled back"))
        c.execute("ROLLBACK")
        c.execute("BEGIN")
        with c.cursor().copy(f"COPY {table} (k, s) FROM STDIN") as copy:
            copy.write_row((2, "committed"))
        c.execute(f"INSERT INTO {table} (k, s) VALUES (3, 'insert')")
        c.execute("COMMIT")
        c.execute("BEGIN")  # a bad COPY fails the block: COMMIT rolls back
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            _copy(c, f"COPY {table} (k, s) FROM STDIN", rows=((4, "x"),), data=("five\ty\n",))
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            c.execute(f"INSERT INTO {table} (k) VALUES (5)")
        c.execute("COMMIT")
        # a duplicate key: PostgreSQL refuses it at the COPY, spate (which checks keys when
        # the block is written) at COMMIT; either way nothing of the block is written
        c.execute("BEGIN")
        with pytest.raises(psycopg.errors.UniqueViolation):  # noqa: PT012
            _copy(c, f"COPY {table} (k, s) FROM STDIN", rows=((6, "x"), (6, "y")))
            c.execute("COMMIT")
        c.execute("ROLLBACK")
    assert [r[0] for r in _same(conns, table)] == [2, 3]


def test_errors_of_the_statement(spate_dsn: str) -> None:
    with psycopg.connect(spate_dsn, autocommit=True) as c:
        c.execute("CREATE TABLE copy_err (a bigint)")
        c.execute("CREATE VIEW copy_err_v AS SELECT a FROM copy_err")
        try:
            cases = [
                ("COPY nope FROM STDIN", "42P01"),
                ("COPY copy_err_v FROM STDIN", "42809"),
                ("COPY copy_err (zz) FROM STDIN", "42703"),
                ("COPY copy_err FROM '/etc/passwd'", "0A000"),
                ("COPY copy_err FROM STDIN WITH (FORMAT xml)", "22023"),
            ]
            for sql, sqlstate in cases:
                with pytest.raises(psycopg.Error) as err:
                    _copy(c, sql, data=("1\n",))
                assert err.value.sqlstate == sqlstate, sql
            assert c.execute("SELECT count(*) FROM copy_err").fetchone() == (0,)
        finally:
            c.execute("DROP VIEW copy_err_v")
            c.execute("DROP TABLE copy_err")


def test_asyncpg_copy_records_to_table(spate_dsn: str, server: ServerThread) -> None:
    import asyncpg

    table = f"a_{uuid.uuid4().hex[:8]}"
    records = [
        (i, f"r{i}", Decimal(i) / 4, dt.date(2020, 1, 1) + dt.timedelta(i)) for i in range(50)
    ]

    async def go() -> list[Any]:
        conn = await asyncpg.connect(
            host="127.0.0.1", port=server.port, user="tester", database="spate", ssl=False
        )
        try:
            await conn.execute(f"CREATE TABLE {table} (k bigint, s text, n numeric(8,2), d date)")
            tag = await conn.copy_records_to_table(table, records=records)
            assert tag == "COPY 50"
            rows = await conn.fetch(f"SELECT k, s, n, d FROM {table} ORDER BY k")
            await conn.execute(f"DROP TABLE {table}")
            return [tuple(r) for r in rows]
        finally:
            await conn.close()

    assert asyncio.run(go()) == records


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_backslash_copy_csv_header(
    spate_dsn: str, server: ServerThread, tmp_path: Path
) -> None:
    table = f"p_{uuid.uuid4().hex[:8]}"
    path = tmp_path / "rows.csv"
    path.write_text('id,name\n1,ann\n2,"bo, b"\n3,\n')
    with psycopg.connect(spate_dsn, autocommit=True) as c:
        c.execute(f"CREATE TABLE {table} (id bigint, name text)")
        try:
            out = subprocess.run(
                ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                 "-p", str(server.port), "-U", "tester", "-d", "spate",
                 "-c", f"\\copy {table} from '{path}' csv header"],
                capture_output=True, text=True, timeout=60, env={"PGSSLMODE": "disable"},
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == "COPY 3"
            rows = c.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
            assert rows == [(1, "ann"), (2, "bo, b"), (3, None)]
            back = tmp_path / "back.csv"
            out = subprocess.run(
                ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                 "-p", str(server.port), "-U", "tester", "-d", "spate",
                 "-c", f"\\copy (SELECT * FROM {table} ORDER BY id) to '{back}' csv header"],
                capture_output=True, text=True, timeout=60, env={"PGSSLMODE": "disable"},
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            assert back.read_text() == path.read_text()
        finally:
            c.execute(f"DROP TABLE {table}")


def _copy_statement(sql: str) -> object:
    (parsed,) = spate.sql.parse(sql)
    return recognise(parsed)


def test_the_sql_layer_types_copy() -> None:
    """A COPY comes from the SQL layer as a typed statement: its table or query, columns,
    direction, format and options, in both option syntaxes."""
    assert _copy_statement("COPY t FROM STDIN") == CopyFrom("t", None)
    assert _copy_statement('COPY public."T" (a, "B") FROM stdin WITH CSV HEADER') == CopyFrom(
        "T", ("a", "B"), CopyOptions("csv", True, ",", "")
    )
    assert _copy_statement("COPY t FROM STDIN WITH (FORMAT binary)") == CopyFrom(
        "t", None, CopyOptions("binary")
    )
    assert _copy_statement("copy t from stdin binary") == CopyFrom("t", None, CopyOptions("binary"))
    assert _copy_statement(  # asyncpg's form: the options without WITH
        "COPY t(a) FROM STDIN (FORMAT csv, DELIMITER '|', NULL 'x', QUOTE '''', ESCAPE E'\\\\',"
        " HEADER false, FORCE_NOT_NULL (a), FORCE_NULL (a), ENCODING 'utf8', FREEZE)"
    ) == CopyFrom(
        "t",
        ("a",),
        CopyOptions("csv", False, "|", "x", "'", "\\", force_not_null=("a",), force_null=("a",)),
    )
    assert _copy_statement(
        "COPY t FROM STDIN WITH DELIMITER AS ';' NULL AS '' CSV QUOTE AS '`' FORCE NOT NULL a, b"
    ) == CopyFrom(
        "t", None, CopyOptions("csv", False, ";", "", "`", "`", force_not_null=("a", "b"))
    )
    to = _copy_statement("COPY (SELECT k, s FROM t) TO STDOUT (FORMAT csv, FORCE_QUOTE *)")
    assert isinstance(to, CopyTo)
    assert to.query.sql == "SELECT k, s FROM t"  # the query's own tokens
    assert [t.text for t in to.query.tokens] == ["SELECT", "k", ",", "s", "FROM", "t"]
    assert to.options == CopyOptions("csv", delimiter=",", null="", force_quote_all=True)
    to = _copy_statement('COPY s."T" (a, "B") TO STDOUT WITH CSV HEADER')
    assert isinstance(to, CopyTo)
    assert to.query.sql == 'SELECT "a", "B" FROM "s"."T"'
    assert to.options == CopyOptions("csv", True, ",", "")
    refused = {
        "COPY t FROM STDIN WITH (QUOTE 'x')": "0A000",  # CSV only
        "COPY t FROM STDIN WITH (FORMAT xml)": "22023",
        "COPY t FROM STDIN WITH (DELIMITER ';;')": "22023",
        "COPY t FROM STDIN WITH (FORMAT csv, FORMAT text)": "42601",
        "COPY t FROM STDIN WITH (BOGUS 1)": "42601",
        "COPY t FROM STDIN WITH (FORMAT binary, HEADER)": "0A000",
        "COPY t FROM STDIN WITH (FORMAT csv, FORCE_QUOTE (a))": "0A000",  # COPY TO only
        "COPY t TO STDOUT WITH (FORMAT csv, FORCE_NOT_NULL (a))": "0A000",  # COPY FROM only
        "COPY t FROM '/etc/passwd'": "0A000",
        "COPY t TO '/tmp/x'": "0A000",
    }
    for sql, sqlstate in refused.items():
        with pytest.raises(SqlError) as err:
            _copy_statement(sql)
        assert err.value.sqlstate == sqlstate, sql


def test_raw_protocol_copy_fail_and_stray_data(server: ServerThread, spate_dsn: str) -> None:
    """CopyInResponse describes the columns; CopyFail is 57014 and writes nothing; CopyData
    after an error is ignored until CopyDone, and the session goes on."""
    from . import wire

    with psycopg.connect(spate_dsn, autocommit=True) as c:
        c.execute("CREATE TABLE copy_raw (a bigint, b text)")
        try:
            sock = wire.connect(server.port)
            sock.sendall(wire.message(b"Q", b"COPY copy_raw FROM STDIN\0"))
            (kind, body), *_ = wire.until(sock, b"G")
            assert kind == b"G" and body == b"\0\0\2\0\0\0\0"  # text, 2 columns, text each
            sock.sendall(wire.message(b"d", b"1\tone\n") + wire.message(b"f", b"stop\0"))
            got = wire.until(sock, b"Z")
            assert [wire.error_code(b) for k, b in got if k == b"E"] == ["57014"]
            sock.sendall(wire.message(b"Q", b"COPY copy_raw FROM STDIN WITH (FORMAT binary)\0"))
            wire.until(sock, b"G")
            sock.sendall(wire.message(b"d", b"NOTPGCOPY\n\0\0\0\0\0\0\0\0\0"))
            got = wire.until(sock, b"Z")
            assert [wire.error_code(b) for k, b in got if k == b"E"] == ["22P03"]
            sock.sendall(wire.message(b"d", b"more\n") + wire.message(b"c"))  # ignored
            sock.sendall(wire.message(b"Q", b"COPY copy_raw FROM STDIN\0"))
            wire.until(sock, b"G")
            sock.sendall(wire.message(b"d", b"2\ttwo\n\\.\n") + wire.message(b"c"))
            got = wire.until(sock, b"Z")
            assert (b"C", b"COPY 1\0") in got
            sock.close()
            assert c.execute("SELECT * FROM copy_raw").fetchall() == [(2, "two")]
        finally:
            c.execute("DROP TABLE copy_raw")


def test_check_constraint(spate_dsn: str, postgres_url: str) -> None:
    table = f"c_{uuid.uuid4().hex[:8]}"
    for dsn in (spate_dsn, postgres_url):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"CREATE TABLE {table} (a bigint, CONSTRAINT pos CHECK (a > 0))")
            try:
                with pytest.raises(psycopg.errors.CheckViolation):
                    _copy(c, f"COPY {table} FROM STDIN", data=("1\n2\n-3\n",))
                assert c.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
                assert _copy(c, f"COPY {table} FROM STDIN", data=("1\n2\n",)) == 2
            finally:
                c.execute(f"DROP TABLE {table}")


@pytest.mark.parametrize(
    "options",
    [
        "",
        "WITH (FORMAT csv)",
        "WITH CSV",
        "WITH (FORMAT csv, HEADER)",
        "WITH CSV HEADER",
        "WITH (FORMAT text, HEADER)",
        "WITH (DELIMITER '|', NULL 'nil')",
        "WITH (FORMAT csv, FORCE_QUOTE *)",
        "WITH (FORMAT csv, FORCE_QUOTE (s), QUOTE '''', ESCAPE '\\', NULL 'n')",
        "WITH CSV DELIMITER ';' FORCE QUOTE k",
    ],
)
def test_copy_to_stdout_as_postgresql(
    both: tuple[list[tuple[str, Conn]], str], options: str
) -> None:
    """What COPY FROM wrote comes back out of COPY TO as PostgreSQL's does."""
    conns, table = both
    out = {}
    for name, c in conns:
        _copy(c, f"COPY {table} FROM STDIN", rows=tuple(ROWS))
        got = []
        for sql in (
            f"COPY {table} TO STDOUT {options}",
            f"COPY (SELECT k, s FROM {table}) TO STDOUT {options}",
        ):
            with c.cursor() as cur, cur.copy(sql) as copy:
                got.append(sorted(bytes(b) for b in copy))
        out[name] = got
    assert out["spate"] == out["postgres"]


@pytest.mark.parametrize(
    "options",
    [
        "WITH (FORMAT csv, FORCE_NOT_NULL (s))",
        "WITH (FORMAT csv, FORCE_NULL (s))",
        "WITH (FORMAT csv, FORCE_NULL (s), NULL 'x')",
        "WITH CSV FORCE NOT NULL s",
    ],
)
def test_force_null_options_as_postgresql(
    both: tuple[list[tuple[str, Conn]], str], options: str
) -> None:
    """FORCE_NOT_NULL and FORCE_NULL read a CSV's NULL strings as PostgreSQL does."""
    conns, table = both
    for _, c in conns:
        _copy(c, f"COPY {table} (k, s) FROM STDIN {options}", data=('1,\n2,""\n3,x\n4,"x"\n',))
    rows = _same(conns, table)
    assert len(rows) == 4


def test_binary_copy_to_stdout_as_postgresql(both: tuple[list[tuple[str, Conn]], str]) -> None:
    """COPY (query) TO STDOUT (FORMAT binary): the same bytes as PostgreSQL's."""
    conns, table = both
    out = {}
    for name, c in conns:
        _copy(c, f"COPY {table} FROM STDIN", rows=tuple(ROWS))
        sql = f"COPY (SELECT k, i, s, b, y FROM {table} ORDER BY k) TO STDOUT (FORMAT binary)"
        with c.cursor() as cur, cur.copy(sql) as copy:
            out[name] = b"".join(bytes(b) for b in copy)
    assert out["spate"] == out["postgres"]
    assert out["spate"].startswith(b"PGCOPY\n\xff\r\n\x00")


def test_an_engine_without_copy_refuses_it() -> None:
    """The test engine (``FakeEngine``) has no ``copy_in``: 0A000, and the session goes on."""
    from .fake_engine import FakeEngine

    fake = ServerThread(FakeEngine(), ServerConfig(port=0))
    try:
        dsn = f"host=127.0.0.1 port={fake.port} user=tester dbname=spate sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as c:
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                _copy(c, "COPY t FROM STDIN", data=("1\n",))
            assert c.execute("SELECT 1").fetchone() is not None
    finally:
        fake.close()


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_smallint_real_timestamptz(spate_dsn: str, postgres_url: str, fmt: str) -> None:
    """spate keeps a timestamptz as the UTC time (read back without a zone): compared so."""
    table = f"z_{uuid.uuid4().hex[:8]}"
    rows = [
        (-3, 2.5, dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))),
        (None, None, None),
    ]
    got = []
    for dsn in (spate_dsn, postgres_url):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"CREATE TABLE {table} (s smallint, r real, tz timestamptz)")
            try:
                with c.cursor() as cur, cur.copy(f"COPY {table} FROM STDIN (FORMAT {fmt})") as cp:
                    if fmt == "binary":
                        cp.set_types(["int2", "float4", "timestamptz"])
                    for r in rows:
                        cp.write_row(r)
                read = c.execute(f"SELECT * FROM {table}").fetchall()
                got.append(
                    sorted(
                        (
                            tuple(
                                v.astimezone(dt.UTC).replace(tzinfo=None)
                                if isinstance(v, dt.datetime) and v.tzinfo
                                else v
                                for v in r
                            )
                            for r in read
                        ),
                        key=repr,
                    )
                )
            finally:
                c.execute(f"DROP TABLE {table}")
    assert got[0] == got[1]
    assert got[0][0][2] == dt.datetime(2020, 1, 2, 1, 4, 5)


@pytest.mark.parametrize("fmt", ["text", "csv", "binary"])
def test_interval_column_as_postgresql(spate_dsn: str, postgres_url: str, fmt: str) -> None:
    """An interval column is written as the intervals the fields are (PostgreSQL's text
    forms, or its binary format) and reads back as PostgreSQL's; a text that is no interval
    is 22007 and writes nothing."""
    table = f"iv_{uuid.uuid4().hex[:8]}"
    values = ["1 day 00:00:03", "-2 mons +04:05:06.5", "1 year 2 days", "00:00:00"]
    got = []
    for dsn in (spate_dsn, postgres_url):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"CREATE TABLE {table} (k integer, iv interval)")
            try:
                sql = f"COPY {table} FROM STDIN (FORMAT {fmt})"
                with c.cursor() as cur, cur.copy(sql) as cp:
                    if fmt == "binary":
                        cp.set_types(["int4", "interval"])
                        for k in range(len(values)):
                            cp.write_row((k, dt.timedelta(days=k, seconds=3.5 * k)))
                        cp.write_row((len(values), None))
                    else:
                        sep = "\t" if fmt == "text" else ","
                        null = "\\N" if fmt == "text" else ""
                        lines = [f"{k}{sep}{v}\n" for k, v in enumerate(values)]
                        cp.write("".join([*lines, f"{len(values)}{sep}{null}\n"]))
                with pytest.raises(psycopg.errors.InvalidDatetimeFormat):
                    _copy(c, f"COPY {table} FROM STDIN", data=("9\t1 day\n10\tnot an interval\n",))
                got.append(c.execute(f"SELECT k, iv, iv::text FROM {table} ORDER BY k").fetchall())
            finally:
                c.execute(f"DROP TABLE {table}")
    assert got[0] == got[1]
    assert len(got[0]) == len(values) + 1


def _million(c: Conn, table: str, bad_at: int | None, give_up_after: int | None) -> int:
    """COPY a million rows into ``table`` in blocks of 50,000 lines, the row ``bad_at`` with a
    value that is no float, the client giving up (CopyFail) after row ``give_up_after``."""
    with c.cursor() as cur:
        with cur.copy(f"COPY {table} (k, s, f) FROM STDIN") as copy:
            lines = []
            for i in range(1_000_000):
                lines.append(f"{i}\tv{i}\t{'x' if i == bad_at else i / 2}\n")
                if len(lines) == 50_000:
                    copy.write("".join(lines))
                    lines = []
                    if give_up_after is not None and i > give_up_after:
                        raise RuntimeError("client gave up")
            copy.write("".join(lines))
        return cur.rowcount


@pytest.mark.slow
def test_a_million_rows_all_or_none(spate_dsn: str, postgres_url: str) -> None:
    """psycopg's COPY of a million rows: a bad value at row 600,000 or the client's CopyFail
    at row 700,000 writes nothing, as in PostgreSQL; the whole COPY writes every row (its
    count, not read back: a read of a million rows without a cluster takes most of a minute)."""
    table = f"m_{uuid.uuid4().hex[:8]}"
    for dsn in (spate_dsn, postgres_url):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"CREATE TABLE {table} (k bigint, s text, f double precision)")
            try:
                with pytest.raises(psycopg.errors.InvalidTextRepresentation):
                    _million(c, table, 600_000, None)
                assert c.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), dsn
                with pytest.raises(RuntimeError):
                    _million(c, table, None, 700_000)
                assert c.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), dsn
                assert _million(c, table, None, None) == 1_000_000, dsn
            finally:
                c.execute(f"DROP TABLE {table}")
