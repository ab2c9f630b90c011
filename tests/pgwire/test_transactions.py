"""Transaction blocks over the wire: psycopg against a server on an Environment (no clusters),
every write path compared with PostgreSQL for the same statements (what survives ROLLBACK and
a failed block, the SQLSTATEs, the transaction status psycopg reports); Materialize's rules
where spate differs from PostgreSQL (a block reads or writes, not both); and a ``spate serve``
killed with SIGKILL inside a block shows nothing of it after a restart."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from spate.environment.api import Environment
from spate.persist.crash import ENV
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.testing.process import spate_env

from .test_serve_cli import _connect, _free_port

pytestmark = pytest.mark.integration

Conn = psycopg.Connection[tuple[Any, ...]]


@pytest.fixture(scope="module")
def spate_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = Environment.open(tmp_path_factory.mktemp("txn") / "data")
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
    finally:
        server.close()
        env.close()


@pytest.fixture
def both(spate_dsn: str, postgres_url: str) -> Iterator[list[tuple[str, Conn, str]]]:
    """A connection to spate and one to PostgreSQL (autocommit: the test sends BEGIN), each
    with a fresh table name ``t_<id>`` (and ``u_<id>``) that the test creates; dropped after."""
    tag = uuid.uuid4().hex[:8]
    conns = [
        ("spate", psycopg.connect(spate_dsn, autocommit=True), tag),
        ("postgres", psycopg.connect(postgres_url, autocommit=True), tag),
    ]
    for _, c, _ in conns:
        c.execute(f"CREATE TABLE t_{tag} (a bigint NOT NULL, b text)")
        c.execute(f"INSERT INTO t_{tag} VALUES (1, 'one'), (2, 'two')")
    yield conns
    for _, c, _ in conns:
        if c.info.transaction_status != TransactionStatus.IDLE:
            c.execute("ROLLBACK")
        for name in (f"t_{tag}", f"u_{tag}", f"v_{tag}"):
            c.execute(f"DROP TABLE IF EXISTS {name}")
        c.close()


def _rows(c: Conn, table: str) -> list[tuple[Any, ...]]:
    return sorted(c.execute(f"SELECT * FROM {table}").fetchall())


def _status(c: Conn) -> str:
    return TransactionStatus(c.info.transaction_status).name


WRITES: dict[str, Callable[[str], str]] = {
    "insert": lambda t: f"INSERT INTO {t} VALUES (3, 'three')",
    "update": lambda t: f"UPDATE {t} SET b = 'uno' WHERE a = 1",
    "delete": lambda t: f"DELETE FROM {t} WHERE a = 2",
}


@pytest.mark.parametrize("write", list(WRITES))
def test_rollback_discards_a_write_as_in_postgres(
    both: list[tuple[str, Conn, str]], write: str
) -> None:
    seen = {}
    for name, c, tag in both:
        t = f"t_{tag}"
        before = _rows(c, t)
        c.execute("BEGIN")
        cur = c.execute(WRITES[write](t))
        during = (_status(c), cur.statusmessage)
        c.execute("ROLLBACK")
        seen[name] = (during, _status(c), _rows(c, t) == before)
    assert seen["spate"] == seen["postgres"]
    assert seen["spate"][1:] == ("IDLE", True)


@pytest.mark.parametrize("write", list(WRITES))
def test_commit_applies_a_write_as_in_postgres(
    both: list[tuple[str, Conn, str]], write: str
) -> None:
    seen = {}
    for name, c, tag in both:
        t = f"t_{tag}"
        c.execute("BEGIN")
        c.execute(WRITES[write](t))
        cur = c.execute("COMMIT")
        seen[name] = (cur.statusmessage, _status(c), _rows(c, t))
    assert seen["spate"] == seen["postgres"]


def test_rollback_discards_ddl_as_in_postgres(both: list[tuple[str, Conn, str]]) -> None:
    seen = {}
    for name, c, tag in both:
        c.execute("BEGIN")
        c.execute(f"CREATE TABLE v_{tag} (a bigint)")
        c.execute("ROLLBACK")
        with pytest.raises(psycopg.Error) as e:
            c.execute(f"SELECT * FROM v_{tag}")
        seen[name] = (e.value.sqlstate, _status(c))
        c.execute("BEGIN")
        c.execute(f"CREATE TABLE v_{tag} (a bigint)")
        c.execute("COMMIT")
        seen[name] += (_rows(c, f"v_{tag}"),)
    assert seen["spate"] == seen["postgres"] == ("42P01", "IDLE", [])


def test_a_failed_statement_aborts_the_block_as_in_postgres(
    both: list[tuple[str, Conn, str]],
) -> None:
    seen = {}
    for name, c, tag in both:
        t = f"t_{tag}"
        c.execute("BEGIN")
        c.execute(f"INSERT INTO {t} VALUES (5, 'five')")
        with pytest.raises(psycopg.Error) as first:
            c.execute(f"INSERT INTO missing_{tag} VALUES (1)")
        failed = _status(c)
        with pytest.raises(psycopg.Error) as ignored:
            c.execute(f"INSERT INTO {t} VALUES (6, 'six')")
        cur = c.execute("COMMIT")  # of a failed block: rolls back
        seen[name] = (
            first.value.sqlstate,
            failed,
            ignored.value.sqlstate,
            str(ignored.value).splitlines()[0],
            cur.statusmessage,
            _status(c),
            _rows(c, t),
        )
    assert seen["spate"] == seen["postgres"]
    assert seen["spate"][:3] == ("42P01", "INERROR", "25P02")
    assert seen["spate"][4:6] == ("ROLLBACK", "IDLE")


def _insert_then_fail(c: Conn, table: str) -> None:
    with c.transaction():
        c.execute(f"INSERT INTO {table} VALUES (7, 'seven')")
        raise ZeroDivisionError


def test_non_autocommit_psycopg_rolls_back_on_an_exception(
    both: list[tuple[str, Conn, str]], spate_dsn: str, postgres_url: str
) -> None:
    tag = both[0][2]
    for dsn in (spate_dsn, postgres_url):
        with psycopg.connect(dsn) as c:  # psycopg sends BEGIN itself
            with pytest.raises(ZeroDivisionError):
                _insert_then_fail(c, f"t_{tag}")
            c.execute(f"INSERT INTO t_{tag} VALUES (8, 'eight')")
            c.commit()
            assert _rows(c, f"t_{tag}") == [(1, "one"), (2, "two"), (8, "eight")]


def test_savepoints_as_in_postgres(both: list[tuple[str, Conn, str]]) -> None:
    seen = {}
    for name, c, tag in both:
        t = f"t_{tag}"
        c.execute("BEGIN")
        c.execute(f"DELETE FROM {t} WHERE a = 1")
        c.execute("SAVEPOINT s")
        c.execute(f"INSERT INTO {t} VALUES (3, 'three')")
        with pytest.raises(psycopg.Error) as first:
            c.execute(f"INSERT INTO {t} VALUES ('x', 'bad')")
        failed = _status(c)
        c.execute("ROLLBACK TO SAVEPOINT s")  # undoes the INSERT, ends the failed state
        c.execute(f"INSERT INTO {t} VALUES (4, 'four')")
        c.execute("RELEASE SAVEPOINT s")
        with pytest.raises(psycopg.Error) as gone:
            c.execute("ROLLBACK TO SAVEPOINT s")
        c.execute("ROLLBACK")
        c.execute("BEGIN")
        c.execute(f"INSERT INTO {t} VALUES (3, 'three')")
        c.execute("SAVEPOINT s")
        c.execute(f"INSERT INTO {t} VALUES (4, 'four')")
        c.execute("ROLLBACK TO s")
        c.execute("COMMIT")
        seen[name] = (first.value.sqlstate, failed, gone.value.sqlstate, _rows(c, t))
    assert seen["spate"][1:] == seen["postgres"][1:]
    assert seen["spate"][1:3] == ("INERROR", "3B001")
    assert seen["spate"][3] == [(1, "one"), (2, "two"), (3, "three")]


def _inner(c: Conn, table: str) -> None:
    with c.transaction():  # a savepoint
        c.execute(f"INSERT INTO {table} VALUES (4, 'four')")
        raise ZeroDivisionError


def _nested(c: Conn, table: str) -> None:
    with c.transaction():
        c.execute(f"INSERT INTO {table} VALUES (3, 'three')")
        with pytest.raises(ZeroDivisionError):
            _inner(c, table)


def test_psycopg_nested_transactions_as_in_postgres(
    both: list[tuple[str, Conn, str]], spate_dsn: str, postgres_url: str
) -> None:
    tag = both[0][2]
    for dsn in (spate_dsn, postgres_url):
        with psycopg.connect(dsn, autocommit=True) as c:
            _nested(c, f"t_{tag}")
            assert _rows(c, f"t_{tag}") == [(1, "one"), (2, "two"), (3, "three")]


def test_a_block_commits_several_tables_together(spate_dsn: str) -> None:
    tag = uuid.uuid4().hex[:8]
    with (
        psycopg.connect(spate_dsn, autocommit=True) as c,
        psycopg.connect(spate_dsn, autocommit=True) as other,
    ):
        c.execute(f"CREATE TABLE t_{tag} (a bigint NOT NULL)")
        c.execute(f"CREATE TABLE u_{tag} (a bigint NOT NULL)")
        c.execute("BEGIN")
        c.execute(f"INSERT INTO t_{tag} VALUES (1), (2)")
        c.execute(f"INSERT INTO u_{tag} VALUES (3)")
        c.execute(f"INSERT INTO t_{tag} VALUES (4)")
        assert _rows(other, f"t_{tag}") == [] and _rows(other, f"u_{tag}") == []
        c.execute("COMMIT")
        assert _rows(other, f"t_{tag}") == [(1,), (2,), (4,)]
        assert _rows(other, f"u_{tag}") == [(3,)]
        c.execute(f"DROP TABLE t_{tag}")
        c.execute(f"DROP TABLE u_{tag}")


def test_materialize_rules_a_block_reads_or_writes(both: list[tuple[str, Conn, str]]) -> None:
    _, c, tag = both[0]
    t = f"t_{tag}"
    c.execute("BEGIN")
    c.execute(f"SELECT * FROM {t}")
    with pytest.raises(psycopg.Error) as e:
        c.execute(f"INSERT INTO {t} VALUES (9, 'nine')")
    assert (e.value.sqlstate, _status(c)) == ("25006", "INERROR")
    c.execute("ROLLBACK")
    c.execute("BEGIN")
    c.execute(f"INSERT INTO {t} VALUES (9, 'nine')")
    with pytest.raises(psycopg.Error) as e:
        c.execute(f"SELECT * FROM {t}")
    assert e.value.sqlstate == "25000"
    c.execute("ROLLBACK")
    c.execute("BEGIN")
    c.execute(f"CREATE TABLE v_{tag} (a bigint)")
    with pytest.raises(psycopg.Error) as e:
        c.execute(f"INSERT INTO {t} VALUES (9, 'nine')")
    assert e.value.sqlstate == "25000"
    c.execute("COMMIT")  # the failed block rolls back: no v_, no row 9
    assert _rows(c, t) == [(1, "one"), (2, "two")]
    with pytest.raises(psycopg.Error):
        c.execute(f"SELECT * FROM v_{tag}")


def test_reads_of_a_block_are_at_one_timestamp(both: list[tuple[str, Conn, str]]) -> None:
    _, c, tag = both[0]
    t = f"t_{tag}"
    c.execute("BEGIN")
    first = _rows(c, t)
    with psycopg.connect(c.info.dsn, autocommit=True) as other:
        other.execute(f"INSERT INTO {t} VALUES (10, 'ten')")
        assert (10, "ten") in _rows(other, t)
    assert _rows(c, t) == first  # still the block's timestamp
    c.execute("COMMIT")
    assert (10, "ten") in _rows(c, t)


def test_a_conflicting_commit_writes_nothing(both: list[tuple[str, Conn, str]]) -> None:
    _, c, tag = both[0]
    t = f"t_{tag}"
    c.execute("BEGIN")
    c.execute(f"DELETE FROM {t} WHERE a = 1")
    with psycopg.connect(c.info.dsn, autocommit=True) as other:
        other.execute(f"DELETE FROM {t} WHERE a = 1")
    with pytest.raises(psycopg.Error) as e:
        c.execute("COMMIT")
    assert (e.value.sqlstate, _status(c)) == ("40001", "IDLE")
    assert _rows(c, t) == [(2, "two")]


def _server(data: Path, port: int, crash_at: str = "") -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "spate", "serve", str(data), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=spate_env({ENV: crash_at}),
    )


def test_a_server_killed_inside_a_block_and_in_a_commit(tmp_path: Path) -> None:
    """SIGKILL (at a crash point: after the first of the two tables of a COMMIT was written; each
    COMMIT of a block writing both tables passes the point twice)
    while another connection is inside a block: after a restart, what was committed before is
    there, nothing of the open block is, and the interrupted COMMIT landed in both tables."""
    data, port = tmp_path / "data", _free_port()
    dsn = f"host=127.0.0.1 port={port} user=me dbname=spate sslmode=disable"
    proc = _server(data, port, crash_at="storage.append.after_shard@3")
    try:
        a, b = _connect(dsn, proc), _connect(dsn, proc)
        a.execute("CREATE TABLE t (a bigint NOT NULL)")
        a.execute("CREATE TABLE u (a bigint NOT NULL)")
        for c, n in ((a, 1), (a, 2), (b, 3)):
            c.execute("BEGIN")
            c.execute(f"INSERT INTO t VALUES ({n})")
            c.execute(f"INSERT INTO u VALUES ({n})")
            if n == 1:
                c.execute("COMMIT")  # acknowledged: durable
        with pytest.raises(psycopg.OperationalError):  # block 2 is still open on ``a``
            b.execute("COMMIT")  # killed after the first table of block 3 was written
        assert proc.wait(timeout=30) == -signal.SIGKILL
        a.close()
        b.close()
        proc = _server(data, port)
        with _connect(dsn, proc) as c:
            assert (_rows(c, "t"), _rows(c, "u")) == ([(1,), (3,)], [(1,), (3,)])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
