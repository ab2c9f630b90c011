"""Hostile input: oversized, malformed and fuzzed messages; the server keeps serving."""

from __future__ import annotations

import random
import socket
import struct
import time

import psycopg
import pytest

from spate.pgwire.server import ServerThread
from tests.pgwire import wire

LIMIT = 64 * 1024  # the fixture's max_message_bytes


def test_oversized_statement_is_refused_before_its_body_is_read(
    server: ServerThread, dsn: str
) -> None:
    sock = wire.connect(server.port)
    try:
        # Announce 10 MB but send only a few bytes: the answer must come without the rest.
        sock.sendall(b"Q" + struct.pack("!i", 10_000_000 + 4) + b"SELECT ")
        started = time.monotonic()
        _, body = wire.until(sock, b"E")[-1]
        assert wire.error_code(body) == "54000"
        assert wire.read_message(sock) is None  # closed
        assert time.monotonic() - started < 2
    finally:
        sock.close()
    with psycopg.connect(dsn, autocommit=True) as c, pytest.raises(psycopg.OperationalError):
        c.execute("SELECT '" + "x" * (LIMIT + 10) + "'")
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize(
    "payload",
    [
        wire.message(b"B", b"\0\0\x00\x05"),  # a Bind cut short
        wire.message(b"P", b"no terminator"),
        wire.message(b"?", b""),  # unknown type
        wire.startup_packet(),  # a second startup packet
        b"Q" + struct.pack("!i", 2),  # a length shorter than its own field
        wire.message(b"D", b"X\0"),  # Describe of neither S nor P
    ],
)
def test_malformed_message_closes_only_that_connection(
    server: ServerThread, dsn: str, payload: bytes
) -> None:
    with psycopg.connect(dsn, autocommit=True) as bystander:
        sock = wire.connect(server.port)
        try:
            sock.sendall(payload + wire.message(b"S"))
            msgs = []
            while (m := wire.read_message(sock)) is not None:
                msgs.append(m)
            assert msgs and msgs[-1][0] == b"E"
            assert wire.error_code(msgs[-1][1]) in ("08P01", "54000")
        finally:
            sock.close()
        assert bystander.execute("SELECT 2").fetchone() == (2,)


def _valid_messages() -> list[bytes]:
    return [
        wire.message(b"Q", b"SELECT * FROM t WHERE id = 5\0"),
        wire.parse_msg("SELECT * FROM t WHERE id = $1", "s1", (20,)),
        wire.bind_msg([b"7"], stmt="s1"),
        wire.message(b"D", b"P\0"),
        wire.message(b"E", b"\0" + struct.pack("!i", 0)),
        wire.message(b"C", b"S" + b"s1\0"),
        wire.message(b"Q", b"SET cluster = 'x'; SHOW cluster\0"),
        wire.message(b"Q", b"BEGIN; DECLARE c CURSOR FOR SELECT * FROM t; FETCH 3 c; COMMIT\0"),
        wire.message(b"H"),
    ]


def _mutate(rng: random.Random, msg: bytes) -> bytes:
    kind, body = msg[:1], msg[5:]
    choice = rng.randrange(6)
    if choice == 0 and body:  # flip bytes, keep the length
        b = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return kind + struct.pack("!i", len(b) + 4) + bytes(b)
    if choice == 1 and body:  # truncate the body, length to match
        cut = body[: rng.randrange(len(body))]
        return kind + struct.pack("!i", len(cut) + 4) + cut
    if choice == 2:  # another type byte
        return bytes([rng.randrange(256)]) + msg[1:]
    if choice == 3:  # a length beyond the limit
        return kind + struct.pack("!i", LIMIT + rng.randint(5, 1 << 30)) + body
    if choice == 4:  # a length shorter than the body: the rest reads as the next message
        return kind + struct.pack("!i", rng.randint(-5, 4 + len(body))) + body
    junk = rng.randbytes(rng.randint(0, 64))  # garbage body
    return kind + struct.pack("!i", len(junk) + 4) + junk


def test_fuzzed_messages_never_take_the_server_down(
    server: ServerThread, dsn: str, seed: int
) -> None:
    print(f"fuzz seed {seed} (replay: pytest --seed {seed})")
    rng = random.Random(seed)
    valid = _valid_messages()
    sent = closed = 0
    with psycopg.connect(dsn, autocommit=True) as bystander:
        sock = wire.connect(server.port, timeout=3)
        try:
            while sent < 2000:
                payload = _mutate(rng, rng.choice(valid))
                try:
                    sock.sendall(payload + wire.message(b"S"))
                    sent += 1
                    wire.until(sock, b"Z")
                except (EOFError, ConnectionError, TimeoutError):
                    closed += 1
                    sock.close()
                    sock = wire.connect(server.port, timeout=3)
        finally:
            sock.close()
        assert bystander.execute("SELECT 3").fetchone() == (3,)
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SELECT * FROM t WHERE id = %s", (8,)).fetchone()[0] == 8  # type: ignore[index]
    print(f"{sent} mutated messages, {closed} connections closed by the server")
    assert sent >= 2000 and closed > 0


def test_a_client_that_stops_reading_does_not_hold_a_subscription() -> None:
    from spate.pgwire.server import ServerConfig
    from tests.pgwire.fake_engine import FakeEngine

    engine = FakeEngine()
    s = ServerThread(engine, ServerConfig(port=0, max_stream_stall=1.0))
    try:
        sock = wire.connect(s.port)
        try:
            sock.sendall(wire.message(b"Q", b"SUBSCRIBE t EVERY 0.001 BIG\0"))
            deadline = time.monotonic() + 5
            while engine.streams_open == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert engine.streams_open == 1
            # Never read: the socket buffers fill, then the pump's queue, then it gives up.
            deadline = time.monotonic() + 60
            while engine.streams_open and time.monotonic() < deadline:
                time.sleep(0.1)
            assert engine.streams_open == 0
        finally:
            sock.close()
    finally:
        s.close()


def test_gssenc_refused_and_a_newer_minor_version_negotiated(server: ServerThread) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(struct.pack("!ii", 8, 80877104))  # GSSENCRequest
        assert sock.recv(1) == b"N"
        body = struct.pack("!i", (3 << 16) | 2) + b"user\0me\0_pq_.something\0x\0\0"
        sock.sendall(struct.pack("!i", len(body) + 4) + body)
        msgs = wire.until(sock, b"Z")
        kinds = [k for k, _ in msgs]
        assert kinds[0] == b"v"  # NegotiateProtocolVersion: 3.0, the option unknown
        assert msgs[0][1] == struct.pack("!ii", 0, 1) + b"_pq_.something\0"
        assert b"R" in kinds and b"K" in kinds
