"""statement_timeout, cancel requests and closed connections stop the engine's work.

``SET statement_timeout`` is parsed and shown as PostgreSQL does (checked against PostgreSQL
when ``SPATE_TEST_POSTGRES_URL`` is set); a statement that runs past it ends with 57014
"canceling statement due to statement timeout"; every way a statement ends early sets the
engine call's cancel event, so that the engine stops its work (the fake engine's ``SLEEP``
records how long it ran before it saw the event).
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from spate.pgwire.server import ServerConfig, ServerThread
from tests.pgwire.fake_engine import FakeEngine

VALUES = [
    "5s", "5000", "1.5s", "0", "0s", "2.5", "0.5", "1.5ms", "0x10", "010", " 7 min ", "1d",
    "1e3", "90s", "60000", "1.5h", "3000us", "0.0005s", "2147483647", ".5s",
    "abc", "5S", "5 parsecs", "-1", "-1s", "3000000000", "2147483648", "24855d", "", "1msx",
    "inf", "08", "0x", "5e", "1e400",
]  # fmt: skip


def _wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def _answers(dsn: str) -> list[object]:
    out: list[object] = []
    with psycopg.connect(dsn, autocommit=True) as c:
        for v in VALUES:
            try:
                c.execute("SET statement_timeout = '" + v.replace("'", "''") + "'")
                out.append(c.execute("SHOW statement_timeout").fetchone())
            except psycopg.Error as e:
                out.append((e.sqlstate, e.diag.message_primary))
    return out


def test_set_statement_timeout_parses_and_shows_as_postgresql(dsn: str) -> None:
    url = os.environ.get("SPATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("SPATE_TEST_POSTGRES_URL is not set: no PostgreSQL to compare with")
    ours, theirs = _answers(dsn), _answers(url)
    assert ours == theirs
    assert ("5s",) in ours and ("1500ms",) in ours


def test_a_statement_past_its_timeout_ends_with_57014_and_stops_the_engine(
    dsn: str, engine: FakeEngine
) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SET statement_timeout = 300")  # integer: milliseconds
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            c.execute("SLEEP 5")
        assert time.monotonic() - started < 2
        assert e.value.diag.message_primary == "canceling statement due to statement timeout"
        _wait_for(lambda: len(engine.stopped) == 1)
        assert 0.25 <= engine.stopped[0] < 1.5
        assert c.execute("SELECT 4").fetchone() == (4,)  # the session carries on
        c.execute("SET statement_timeout = 0")  # off
        c.execute("SLEEP 0.5")
        assert len(engine.stopped) == 1


def test_a_cancel_request_stops_the_engine_too(dsn: str, engine: FakeEngine) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        timer = threading.Timer(0.3, c.cancel_safe)
        timer.start()
        with pytest.raises(psycopg.errors.QueryCanceled, match="user request"):
            c.execute("SLEEP 5")
        _wait_for(lambda: len(engine.stopped) == 1)
        assert engine.stopped[0] < 1.5
        c.execute("SLEEP 0.3")  # the next statement is not canceled
        assert len(engine.stopped) == 1


def _query(sql: str) -> bytes:
    body = sql.encode() + b"\0"
    return b"Q" + struct.pack("!i", len(body) + 4) + body


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    params = b"user\0t\0database\0spate\0\0"
    s.sendall(struct.pack("!ii", len(params) + 8, 196608) + params)
    buf = b""
    while not buf.endswith(b"Z\x00\x00\x00\x05I"):
        chunk = s.recv(65536)
        assert chunk, "closed during startup"
        buf += chunk
    return s


def test_a_client_closing_its_connection_stops_its_statement(
    server: ServerThread, engine: FakeEngine
) -> None:
    s = _connect(server.port)
    s.sendall(_query("SLEEP 10"))
    time.sleep(0.3)
    s.close()
    _wait_for(lambda: len(engine.stopped) == 1)
    assert engine.stopped[0] < 2
    _wait_for(lambda: server.server.sessions == 0)


def test_what_a_client_sends_while_a_statement_runs_is_answered_after_it(
    server: ServerThread,
) -> None:
    with _connect(server.port) as s:
        s.sendall(_query("SLEEP 0.3"))
        time.sleep(0.1)
        s.sendall(_query("SELECT 7") + _query("SELECT 'x'"))
        buf = b""
        while buf.count(b"Z\x00\x00\x00\x05I") < 3:
            chunk = s.recv(65536)
            assert chunk
            buf += chunk
    tags = [t for t in (b"SLEEP\0", b"SELECT 1\0") if t in buf]
    assert tags == [b"SLEEP\0", b"SELECT 1\0"]
    assert buf.index(b"SLEEP\0") < buf.index(b"\x00\x00\x00\x017") < buf.index(b"\x00\x00\x00\x01x")


@pytest.fixture
def timed_server(engine: FakeEngine) -> Iterator[ServerThread]:
    s = ServerThread(engine, ServerConfig(port=0, statement_timeout_ms=300))
    try:
        yield s
    finally:
        s.close()


def test_the_server_wide_default_applies_until_a_session_sets_its_own(
    timed_server: ServerThread,
) -> None:
    dsn = f"host=127.0.0.1 port={timed_server.port} user=t dbname=spate sslmode=disable"
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SHOW statement_timeout").fetchone() == ("300ms",)
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            c.execute("SLEEP 5")
        c.execute("SET statement_timeout = '2s'")
        c.execute("SLEEP 0.5")
        c.execute("RESET statement_timeout")
        assert c.execute("SHOW statement_timeout").fetchone() == ("300ms",)
