"""Fuzzing: 10,000 random and mutated frames against the decoder and
10,000 against a live server. No crash, no hang over 1 s per frame, a ProtocolError for every
invalid frame, nothing executed before authentication, and the server keeps serving."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spate.codec import decode_any, decode_message, encode_message
from spate.errors import ProtocolError
from spate.protocol.connection import Connection, TransportOptions, decode_incoming
from spate.protocol.errors import ConnectionClosed
from spate.protocol.frame import MAX_FRAME_BYTES, Frame, FrameKind
from spate.protocol.handshake import Role
from spate.protocol.stream import FrameStream
from spate.protocol.transport import connect, serve
from tests.protocol.fuzz import FrameFuzzer
from tests.protocol.raw import authenticated_raw, closed_by_peer, open_raw
from tests.protocol.test_transport import HELLO

FRAMES = 10_000
SIDES: list[tuple[Role, str]] = [
    ("compute", "replica"),
    ("compute", "controller"),
    ("storage", "replica"),
    ("storage", "controller"),
]


@dataclass
class Outcome:
    messages: list[object] = field(default_factory=list)
    error: ProtocolError | None = None


def decode_stream(data: bytes, role: Role, side: str) -> Outcome:
    """What a receiver makes of ``data`` followed by end of stream."""
    out = Outcome()
    stream = FrameStream(max_body=MAX_FRAME_BYTES, authenticated=True)
    stream.feed(data)
    stream.connection_lost(None)  # end of stream
    try:
        for item in stream.frames_ready():
            if isinstance(item, ProtocolError):
                raise item
            if isinstance(item, ConnectionClosed):  # a clean end between frames
                break
            assert isinstance(item, Frame)
            if item.kind == FrameKind.MESSAGE:
                out.messages.append(decode_incoming(item.body, role, side))  # type: ignore[arg-type]
    except ProtocolError as e:
        out.error = e
    return out


def test_decoder_fuzz(seed: int) -> None:
    fuzzer = FrameFuzzer(seed)
    errors = valid = 0
    slowest = 0.0
    for i in range(FRAMES):
        data = fuzzer.frame()
        role, side = SIDES[i % len(SIDES)]
        start = time.perf_counter()
        try:
            out = decode_stream(data, role, side)
        except Exception as e:  # anything but ProtocolError is a bug
            raise AssertionError(f"frame {i} (seed {seed}) {data[:80].hex()}: {e!r}") from e
        slowest = max(slowest, time.perf_counter() - start)
        for m in out.messages:  # whatever decodes is a well-formed message
            assert decode_message(b"".join(encode_message(m))) == m
        if out.error is not None:
            errors += 1
            assert str(out.error)
        elif out.messages:
            valid += 1
    print(
        f"decoder fuzz: {errors} ProtocolErrors, {valid} still-valid frames, slowest {slowest:.3f} s"
    )
    assert slowest < 1.0
    assert errors > FRAMES * 0.8


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_decoder_random_bytes(data: bytes) -> None:
    for role, side in SIDES:
        out = decode_stream(data, role, side)
        assert out.error is not None or all(
            decode_message(b"".join(encode_message(m))) == m for m in out.messages
        )
    with contextlib.suppress(ProtocolError):
        decode_any(data)


class Counting:
    def __init__(self) -> None:
        self.commands: list[object] = []

    async def __call__(self, conn: Connection) -> None:
        while True:
            self.commands.append(await conn.recv())


async def test_live_server_fuzz(seed: int, secret: bytes, caplog: pytest.LogCaptureFixture) -> None:
    # Thousands of expected "protocol error" warnings: keep only errors (crashes) in the log.
    caplog.set_level(logging.ERROR, logger="spate.protocol.transport")
    rss_before = psutil.Process().memory_info().rss
    fuzzer = FrameFuzzer(seed + 1)
    handler = Counting()
    options = TransportOptions(handshake_timeout=1.0)
    server = await serve(
        "127.0.0.1", 0, role="compute", secret=secret, handler=handler, options=options
    )
    pre_auth = post_errors = post_valid = 0
    epoch = 0
    stream: FrameStream | None = None
    try:
        for i in range(FRAMES):
            data = fuzzer.frame()
            expected = decode_stream(data, "compute", "replica")
            executed = len(handler.commands)
            if i % 5 == 0:
                # Before authentication even a valid command frame executes nothing.
                pre_auth += 1
                raw = await open_raw(server.port)
                raw.write_raw(data)
                raw.write_eof()
                assert await closed_by_peer(raw, within=1.0), f"frame {i} hung (seed {seed})"
                raw.close()
                assert len(handler.commands) == executed
                continue
            if stream is None:
                epoch += 1
                stream = await authenticated_raw(server.port, secret, epoch)
            stream.write_raw(data)
            if expected.error is not None:
                stream.write_eof()
                assert await closed_by_peer(stream, within=1.0), f"frame {i} hung (seed {seed})"
                stream.close()
                stream = None
                post_errors += 1
            deadline = time.monotonic() + 1.0
            while len(handler.commands) < executed + len(expected.messages):
                assert time.monotonic() < deadline, (
                    f"frame {i}: message not delivered (seed {seed})"
                )
                await asyncio.sleep(0.001)
            assert handler.commands[executed:] == expected.messages
            post_valid += bool(expected.messages)
        await asyncio.sleep(0.05)
        stats = server.stats
        print(
            f"live fuzz: {pre_auth} pre-auth, {post_errors} post-auth errors, {post_valid} valid; {stats}"
        )
        assert stats.auth_failures == pre_auth
        assert stats.protocol_errors == post_errors
        assert pre_auth + post_errors + post_valid >= FRAMES * 0.95
        # The server keeps serving.
        conn = await connect(
            "127.0.0.1", server.port, role="compute", epoch=epoch + 1, secret=secret
        )
        await conn.send(HELLO)
        deadline = time.monotonic() + 2.0
        while handler.commands[-1:] != [HELLO]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.001)
        await conn.close()
    finally:
        if stream is not None:
            stream.close()
        await server.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    grown = psutil.Process().memory_info().rss - rss_before
    assert grown < 200 * 2**20, f"RSS grew by {grown / 2**20:.0f} MiB"
