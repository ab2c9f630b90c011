"""The server's protocol through psycopg 3 (simple and extended protocol, text and binary)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from spate.pgwire.server import ServerThread
from tests.pgwire.fake_engine import FakeEngine, rows


def _expected(i: int) -> tuple[object, ...]:
    r = rows()[i]
    import json

    return tuple(json.loads(str(v)) if k == "doc" else v for k, v in r.items())


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("prepare", [False, True])
def test_every_type_round_trips_in_text_and_binary(dsn: str, binary: bool, prepare: bool) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        for i in (0, 3, 7):
            got = c.execute(
                "SELECT * FROM t WHERE id = %s", (i,), binary=binary, prepare=prepare
            ).fetchall()
            assert got == [_expected(i)]


def test_simple_query_without_parameters(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        cur = c.execute("SELECT * FROM t")
        assert cur.rowcount == 100
        assert [d.name for d in cur.description] == [
            "id", "name", "price", "amount", "flag", "day", "ts", "data", "doc",
        ]  # fmt: skip
        assert cur.fetchall()[5] == _expected(5)


def test_errors_carry_sqlstate_and_the_session_survives(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        with pytest.raises(psycopg.errors.UndefinedTable) as e:
            c.execute("SELECT * FROM nope")
        assert e.value.sqlstate == "42P01"
        assert c.execute("SELECT 2").fetchone() == (2,)


def test_failed_transaction_refuses_until_rollback(dsn: str) -> None:
    with psycopg.connect(dsn) as c:  # not autocommit: psycopg sends BEGIN
        c.execute("SELECT 1")
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute("SELECT * FROM nope")
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            c.execute("SELECT 1")
        c.rollback()
        assert c.execute("SELECT 3").fetchone() == (3,)


def test_set_and_show_are_per_session(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
        a.execute("SET cluster = 'other'")
        a.execute("SET TIME ZONE 'Europe/Paris'")
        assert a.execute("SHOW cluster").fetchone() == ("other",)
        assert b.execute("SHOW cluster").fetchone() == ("default",)
        assert a.info.parameter_status("TimeZone") == "Europe/Paris"
        a.execute("RESET cluster")
        assert a.execute("SHOW cluster").fetchone() == ("default",)
        assert a.execute("SHOW transaction isolation level").fetchone() == ("strict serializable",)
        with pytest.raises(psycopg.errors.UndefinedObject):
            a.execute("SHOW no_such_thing")
        with pytest.raises(psycopg.errors.UndefinedTable):  # the engine refuses it
            a.execute("SET cluster = 'nowhere'")
        assert a.execute("SHOW cluster").fetchone() == ("default",)


def test_server_side_cursor_fetches_in_batches(dsn: str) -> None:
    with psycopg.connect(dsn) as c:
        with c.cursor(name="c1") as cur:
            cur.itersize = 7
            cur.execute("SELECT * FROM t")
            got = list(cur)
        assert len(got) == 100 and got[42] == _expected(42)


def test_copy_out_text_and_csv(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        with c.cursor().copy("COPY (SELECT * FROM t WHERE id = 3) TO STDOUT") as copy:
            data = b"".join(bytes(b) for b in copy)
        assert data == (
            b'3\t\\N\t4.5\t3.07\tf\t2020-01-04\t2021-02-03 04:05:09.1234\t\\\\x0300ff\t{"k": 3}\n'
        )
        with c.cursor().copy("COPY (SELECT * FROM t) TO STDOUT WITH (FORMAT csv)") as copy:
            lines = b"".join(bytes(b) for b in copy).splitlines()
        assert len(lines) == 100 and lines[1].startswith(b"1,name 1,1.5,1.07,f,")


def test_cancel_ends_a_running_statement_with_57014(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        timer = threading.Timer(0.3, c.cancel_safe)
        timer.start()
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            c.execute("SLEEP 5")
        assert time.monotonic() - started < 2
        assert c.execute("SELECT 4").fetchone() == (4,)


def test_cancel_with_a_wrong_key_does_nothing(server: ServerThread, dsn: str) -> None:
    import socket
    import struct

    with psycopg.connect(dsn, autocommit=True) as c:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(struct.pack("!iiii", 16, 80877102, c.info.backend_pid, 12345))
            assert s.recv(10) == b""  # the server closes without a reply
        assert c.execute("SELECT 5").fetchone() == (5,)


def test_subscribe_cursor_fetches_rows_as_they_come(dsn: str, engine: FakeEngine) -> None:
    with psycopg.connect(dsn) as c:
        c.execute("DECLARE s CURSOR FOR SUBSCRIBE t")
        seen: list[int] = []
        while len(seen) < 5:
            for ts, diff, i in c.execute("FETCH 10 s").fetchall():
                assert diff == 1 and ts == 1000 + i
                seen.append(i)
        assert seen == list(range(len(seen)))
        assert c.execute("FETCH 10 s WITH (timeout = '0s')").rowcount >= 0
        c.commit()  # ends the cursor and the subscription
    _wait_for(lambda: engine.streams_open == 0)


def test_declare_outside_a_transaction_is_refused(dsn: str) -> None:
    with (
        psycopg.connect(dsn, autocommit=True) as c,
        pytest.raises(psycopg.errors.NoActiveSqlTransaction),
    ):
        c.execute("DECLARE s CURSOR FOR SUBSCRIBE t")


def test_leaving_a_stream_of_subscribe_cancels_it(dsn: str, engine: FakeEngine) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        got = []
        started = time.monotonic()
        for row in c.cursor().stream("SUBSCRIBE t"):
            got.append(row)
            if len(got) == 3:
                break
        assert time.monotonic() - started < 5
        assert c.execute("SELECT 6").fetchone() == (6,)
    _wait_for(lambda: engine.streams_open == 0)


def test_copy_subscribe_streams_until_canceled(dsn: str, engine: FakeEngine) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        lines: list[bytes] = []

        def read() -> None:
            with c.cursor().copy("COPY (SUBSCRIBE t) TO STDOUT") as copy:
                for data in copy:
                    lines.append(bytes(data))
                    if len(lines) == 3:
                        c.cancel_safe()

        with pytest.raises(psycopg.errors.QueryCanceled):
            read()
        assert lines[0] == b"1000\t1\t0\n"
        assert c.execute("SELECT 7").fetchone() == (7,)
    _wait_for(lambda: engine.streams_open == 0)


def test_disconnect_mid_subscribe_closes_the_stream(dsn: str, engine: FakeEngine) -> None:
    c = psycopg.connect(dsn)
    c.execute("DECLARE s CURSOR FOR SUBSCRIBE t")
    c.execute("FETCH 1 s")
    assert engine.streams_open == 1
    c.pgconn.finish()  # no Terminate, no COMMIT: the socket just goes
    _wait_for(lambda: engine.streams_open == 0)


def _wait_for(cond: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_connections_beyond_the_limit_are_refused() -> None:
    from spate.pgwire.server import ServerConfig

    s = ServerThread(FakeEngine(), ServerConfig(port=0, max_connections=2))
    try:
        dsn = f"host=127.0.0.1 port={s.port} user=t dbname=spate sslmode=disable"
        with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b:
            with pytest.raises(psycopg.OperationalError, match="too many connections"):
                psycopg.connect(dsn)
            assert a.execute("SELECT 1").fetchone() == b.execute("SELECT 1").fetchone() == (1,)
        with psycopg.connect(dsn) as c:  # the slots are free again
            assert c.execute("SELECT 2").fetchone() == (2,)
    finally:
        s.close()


def test_server_shutdown_tells_open_sessions() -> None:
    from spate.pgwire.server import ServerConfig

    s = ServerThread(FakeEngine(), ServerConfig(port=0))
    dsn = f"host=127.0.0.1 port={s.port} user=t dbname=spate sslmode=disable"
    with psycopg.connect(dsn, autocommit=True) as c:
        s.close()
        with pytest.raises(psycopg.OperationalError, match="administrator command"):
            c.execute("SELECT 1")


def test_a_cancel_with_nothing_running_does_not_cancel_the_next_statement(
    server: ServerThread, dsn: str
) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.cancel_safe()  # idle: nothing to cancel
        time.sleep(0.2)
        started = time.monotonic()
        c.execute("SLEEP 0.3")
        assert time.monotonic() - started >= 0.3


def test_canceling_a_streamed_portal_ends_its_subscription(dsn: str, engine: FakeEngine) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        cur = c.cursor()
        timer = threading.Timer(0.3, c.cancel_safe)
        timer.start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            cur.execute("SUBSCRIBE t")  # extended protocol, rows until canceled
        _wait_for(lambda: engine.streams_open == 0)
        assert c.execute("SELECT 8").fetchone() == (8,)
