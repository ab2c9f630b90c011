"""Bounded per-connection cost: startups time out, a huge statement stalls no other session,
parameter counts are unsigned 16-bit."""

from __future__ import annotations

import contextlib
import resource
import socket
import struct
import threading
import time
from collections.abc import Iterator

import psycopg
import pyarrow as pa
import pytest

from spate.pgwire.engine import Context, Result, Rows
from spate.pgwire.server import ServerConfig, ServerThread
from spate.sql import MemoryCatalog, plan_statements
from spate.sql.depth import MAX_NESTING
from tests.pgwire import wire
from tests.pgwire.fake_engine import FakeEngine


def _fds_for(sockets: int) -> None:
    """Skip unless this process may open ``sockets`` more descriptors (each is two: ours and
    the server's end, both in this process)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * sockets + 200:
        pytest.skip(f"ulimit -n is {soft}: {2 * sockets + 200} descriptors needed")


class _Client(threading.Thread):
    """A psycopg client that connects and queries, again and again, until stopped."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.stop = threading.Event()
        self.rounds = 0
        self.errors: list[BaseException] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as c:
                    assert c.execute("SELECT 1").fetchone() == (1,)
                self.rounds += 1
            except Exception as e:  # every failure is reported by the test
                self.errors.append(e)
            time.sleep(0.02)


def _closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closed ``sock`` (EOF, after at most an error message) in time."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True
    return False


@pytest.fixture
def quick() -> Iterator[ServerThread]:
    s = ServerThread(FakeEngine(), ServerConfig(port=0, startup_timeout=1.5))
    try:
        yield s
    finally:
        s.close()


def test_silent_and_slowloris_startups_time_out_while_a_client_keeps_working(
    quick: ServerThread,
) -> None:
    silent_n, slow_n = 1000, 20
    _fds_for(silent_n + slow_n + 50)
    dsn = f"host=127.0.0.1 port={quick.port} user=real dbname=spate sslmode=disable"
    client = _Client(dsn)
    client.start()
    silent: list[socket.socket] = []
    slow: list[socket.socket] = []
    try:
        started = time.monotonic()
        for _ in range(silent_n):  # far more than max_connections (256)
            silent.append(socket.create_connection(("127.0.0.1", quick.port), timeout=10))
        for _ in range(slow_n):
            slow.append(socket.create_connection(("127.0.0.1", quick.port), timeout=10))
        opened = time.monotonic() - started
        packet = wire.startup_packet("slowloris")
        slow_closed = 0
        for i in range(len(packet)):  # a byte every 0.1 s: the packet would take ~4 s
            for sock in slow:
                with contextlib.suppress(OSError):  # closed by the server already
                    sock.sendall(packet[i : i + 1])
            time.sleep(0.1)
        slow_closed = sum(_closed(sock, 3) for sock in slow)
        silent_closed = sum(_closed(sock, 3) for sock in silent)
        rounds_during = client.rounds
        print(
            f"opened {silent_n + slow_n} sockets in {opened:.2f}s; closed by the timeout: "
            f"{silent_closed}/{silent_n} silent, {slow_closed}/{slow_n} slowloris; the real "
            f"client connected and queried {rounds_during} times meanwhile"
        )
        assert silent_closed == silent_n
        assert slow_closed == slow_n
        assert not client.errors, client.errors[:3]
        assert rounds_during >= 10
        client.stop.set()  # its own next connection would count as starting
        client.join(10)
        assert quick.server.starting == 0
    finally:
        client.stop.set()
        client.join(10)
        for sock in silent + slow:
            sock.close()
    assert not client.errors, client.errors[:3]


def test_beyond_max_startups_the_oldest_startup_is_closed() -> None:
    s = ServerThread(FakeEngine(), ServerConfig(port=0, max_startups=10, startup_timeout=60))
    socks: list[socket.socket] = []
    try:
        for _ in range(30):
            socks.append(socket.create_connection(("127.0.0.1", s.port), timeout=10))
        dsn = f"host=127.0.0.1 port={s.port} user=real dbname=spate sslmode=disable"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        # the real client's startup evicted one more of the silent ones
        assert sum(_closed(sock, 2) for sock in socks[:21]) == 21
        assert s.server.starting == 9
    finally:
        for sock in socks:
            sock.close()
        s.close()


def test_startup_timeout_is_set_from_the_command_line() -> None:
    from typer.testing import CliRunner

    from spate.cli.app import app

    out = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert "--startup-timeout" in out.output and "--max-message-bytes" in out.output


def _latencies(dsn: str, stop: threading.Event, out: list[float]) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        while not stop.is_set():
            t = time.perf_counter()
            assert c.execute("SELECT 1").fetchone() == (1,)
            out.append(time.perf_counter() - t)
            time.sleep(0.005)


class _Inserts(FakeEngine):
    """An INSERT is answered at once: what is measured is the server's own work on the text
    (the fake engine's regexes over 10 MiB would hold the GIL themselves)."""

    def execute(self, sql: str, ctx: Context) -> Result:
        if sql.startswith("INSERT"):
            return Rows(None, "INSERT 0 1")
        return super().execute(sql, ctx)


def test_a_huge_statement_stalls_no_other_session() -> None:
    s = ServerThread(_Inserts(), ServerConfig(port=0))
    try:
        dsn = f"host=127.0.0.1 port={s.port} user=t dbname=spate sslmode=disable"
        big = "INSERT INTO t VALUES ('" + "x" * (10 * 1024 * 1024) + "')"
        stop = threading.Event()
        lat: list[list[float]] = [[] for _ in range(10)]
        threads = [
            threading.Thread(target=_latencies, args=(dsn, stop, out), daemon=True) for out in lat
        ]
        for t in threads:
            t.start()
        time.sleep(0.3)
        before = sum(map(len, lat))
        sock = wire.connect(s.port, timeout=30)
        big_times = []
        try:
            with psycopg.connect(dsn, autocommit=True) as c:
                for i in range(4):
                    t0 = time.perf_counter()
                    if i % 2:  # the extended protocol: Parse, Bind, Execute
                        assert c.execute(big).statusmessage == "INSERT 0 1"
                    else:  # the simple protocol
                        sock.sendall(wire.message(b"Q", big.encode() + b"\0"))
                        assert b"C" in [k for k, _ in wire.until(sock, b"Z")]
                    big_times.append(time.perf_counter() - t0)
        finally:
            sock.close()
            stop.set()
            for t in threads:
                t.join(30)
        during = sorted(x for out in lat for x in out[before // 10 :])
        p50 = during[len(during) // 2]
        p99 = during[int(len(during) * 0.99)]
        print(
            f"4 statements of 10 MiB took {', '.join(f'{x:.2f}' for x in big_times)} s; beside "
            f"them 10 sessions ran {len(during)} SELECT 1: p50 {p50 * 1000:.1f} ms, "
            f"p99 {p99 * 1000:.1f} ms, max {during[-1] * 1000:.1f} ms"
        )
        # The target is p99 <= 50 ms; the bound is generous for a loaded 2-core machine (a
        # statement processed on the event loop held every session for seconds).
        assert p99 < 0.5
    finally:
        s.close()


def _parse_with_types(query: str, oids: list[int]) -> bytes:
    body = b"\0" + query.encode() + b"\0" + struct.pack("!H", len(oids))
    body += b"".join(struct.pack("!I", o) for o in oids)
    return wire.message(b"P", body)


def _bind_text(values: list[bytes]) -> bytes:
    body = b"\0\0" + struct.pack("!H", 0) + struct.pack("!H", len(values))
    body += b"".join(struct.pack("!i", len(v)) + v for v in values)
    return wire.message(b"B", body + struct.pack("!H", 0))


def test_65535_parameters_are_a_count_not_a_negative_number() -> None:
    server = ServerThread(FakeEngine(), ServerConfig(port=0))
    sock = wire.connect(server.port, timeout=30)
    try:
        n = 65535
        # 65,535 declared types (> 32,767: the sign bit is set)
        sock.sendall(
            _parse_with_types(f"SELECT ${n}", [25] * n)
            + wire.message(b"D", b"S\0")
            + wire.message(b"S")
        )
        msgs = wire.until(sock, b"Z")
        kinds = [k for k, _ in msgs]
        assert b"E" not in kinds, msgs
        [desc] = [b for k, b in msgs if k == b"t"]
        assert struct.unpack("!H", desc[:2]) == (n,)
        # and a Bind of 65,535 values
        values = [b"v%d" % i for i in range(n)]
        sock.sendall(_bind_text(values) + wire.message(b"E", b"\0\0\0\0\0") + wire.message(b"S"))
        msgs = wire.until(sock, b"Z")
        assert [k for k, _ in msgs] == [b"2", b"D", b"C", b"Z"], msgs[-2:]
        assert msgs[1][1].endswith(b"v65534")
    finally:
        sock.close()
        server.close()


def test_a_count_larger_than_the_message_is_refused(server: ServerThread) -> None:
    sock = wire.connect(server.port)
    try:
        # 60,000 types announced, 2 sent
        body = b"\0SELECT 1\0" + struct.pack("!H", 60000) + struct.pack("!II", 23, 23)
        sock.sendall(wire.message(b"P", body) + wire.message(b"S"))
        msgs = wire.until(sock, b"E")
        assert wire.error_code(msgs[-1][1]) == "08P01"
        assert b"exceeds the message" in msgs[-1][1]
    finally:
        sock.close()


class _Planning(FakeEngine):
    """The fake engine, but a ``SELECT (`` is parsed and planned by spate's SQL front end."""

    def execute(self, sql: str, ctx: Context) -> Result:
        if sql == "SELECT deep":  # an engine that recursed too deeply running a statement
            raise RecursionError("maximum recursion depth exceeded")
        if sql.startswith("SELECT ("):
            plan_statements(sql, MemoryCatalog())
            return Rows(pa.table({"ok": pa.array([1], pa.int64())}), "SELECT 1")
        return super().execute(sql, ctx)


def test_5000_nested_parentheses_answer_and_deeper_is_54001() -> None:
    s = ServerThread(_Planning(), ServerConfig(port=0))
    try:
        dsn = f"host=127.0.0.1 port={s.port} user=t dbname=spate sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as c:
            for n in (49, 5000):
                assert c.execute("SELECT " + "(" * n + "1" + ")" * n).fetchone() == (1,)
            n = MAX_NESTING + 1
            with pytest.raises(psycopg.errors.StatementTooComplex) as e:
                c.execute("SELECT " + "(" * n + "1" + ")" * n)
            assert e.value.sqlstate == "54001"
            with pytest.raises(psycopg.errors.StatementTooComplex):
                c.execute("SELECT deep")
            assert c.execute("SELECT 1").fetchone() == (1,)
    finally:
        s.close()
