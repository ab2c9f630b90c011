"""Transport security: nothing runs before authentication, no pickle.

Each negative case checks that the connection is closed, that the handler executed zero
commands, and that ``auth_failures`` counted the attempt.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import secrets
from dataclasses import replace
from pathlib import Path

import pytest

from spate.codec import decode_any, encode
from spate.errors import ProtocolError
from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.protocol.compute import CreateDataflow
from spate.protocol.connection import TransportOptions
from spate.protocol.errors import AuthenticationFailed, ConnectionClosed
from spate.protocol.frame import HEADER, MAGIC, MAX_PRE_AUTH_FRAME_BYTES, encode_frame
from spate.protocol.handshake import ClientHello, ClientProof, client_mac, transcript
from spate.protocol.secret import Secret
from spate.protocol.storage import RunIngestion
from spate.protocol.stream import FrameStream
from spate.protocol.tls import client_tls_context, server_tls_context
from spate.protocol.transport import TcpServer, connect, serve
from spate.testing.certs import make_pki
from tests.protocol.compute_model import dataflow
from tests.protocol.raw import (
    authenticated_raw,
    closed_by_peer,
    frame_of,
    open_raw,
    read_verdict_after_hello,
)
from tests.protocol.storage_model import ingestion
from tests.protocol.test_transport import HELLO, Recorder

FAST = TransportOptions(handshake_timeout=0.5)
HELLO_ID, HELLO_ID2 = GlobalId.user(1), GlobalId.user(2)


async def _server(secret: bytes, rec: Recorder, **kw: object) -> TcpServer:
    return await serve(
        "127.0.0.1", 0, role="compute", secret=secret, handler=rec, options=FAST, **kw
    )  # type: ignore[arg-type]


async def _assert_refused(server: TcpServer, rec: Recorder, raw: FrameStream) -> None:
    assert await closed_by_peer(raw, within=3.0), "server kept the connection open"
    await asyncio.sleep(0.05)
    assert rec.commands == [] and rec.connections == []
    assert server.stats.auth_failures >= 1


async def test_command_without_handshake_executes_nothing(secret: bytes) -> None:
    rec = Recorder()
    async with await _server(secret, rec) as server:
        raw = await open_raw(server.port)
        raw.write_raw(frame_of(HELLO))  # a valid command, but no authentication
        await _assert_refused(server, rec, raw)
        raw.close()


async def test_wrong_secret_is_refused_with_a_verdict(secret: bytes) -> None:
    rec = Recorder()
    async with await _server(secret, rec) as server:
        with pytest.raises(AuthenticationFailed, match="refused our credentials"):
            await connect("127.0.0.1", server.port, role="compute", epoch=1, secret=b"k" * 32)
        assert server.stats.auth_failures == 1 and rec.commands == []


async def test_replayed_transcript_is_refused(secret: bytes) -> None:
    rec = Recorder()
    async with await _server(secret, rec) as server:
        # A legitimate session, recorded byte for byte.
        raw = await open_raw(server.port)
        hello = encode(ClientHello(1, "rec", "compute", 5, secrets.token_bytes(32)))
        raw.write_raw(encode_frame(hello))
        server_hello = await raw.read_frame()
        proof = frame_of(ClientProof(client_mac(secret, transcript(hello, server_hello.body))))
        raw.write_raw(proof)
        verdict = await raw.read_frame()
        assert decode_any(verdict.body).code == "ok"  # type: ignore[attr-defined]
        raw.write_raw(frame_of(HELLO))
        await raw.drain()
        while not rec.commands:
            await asyncio.sleep(0.01)
        recorded = encode_frame(hello) + proof + frame_of(HELLO)
        raw.close()
        # Replayed on a new connection: the server's fresh nonce makes the proof stale.
        raw = await open_raw(server.port)
        raw.write_raw(recorded)
        verdict2 = await read_verdict_after_hello(raw)
        assert verdict2.code == "auth" and verdict2.mac == b""
        assert await closed_by_peer(raw, within=3.0)
        assert rec.commands == [HELLO]  # only the legitimate session's command
        assert len(rec.connections) == 1 and server.stats.auth_failures == 1
        raw.close()


@pytest.mark.parametrize("cut", [3, 20, -5])
async def test_truncated_handshake_is_refused(secret: bytes, cut: int) -> None:
    rec = Recorder()
    async with await _server(secret, rec) as server:
        raw = await open_raw(server.port)
        hello = frame_of(ClientHello(1, "t", "compute", 1, secrets.token_bytes(32)))
        raw.write_raw(hello[:cut])
        await raw.drain()
        raw.write_eof()
        await _assert_refused(server, rec, raw)
        raw.close()


async def test_handshake_timeout_closes_the_connection(secret: bytes) -> None:
    rec = Recorder()
    async with await _server(secret, rec) as server:
        loop = asyncio.get_running_loop()
        begin = loop.time()
        raw = await open_raw(server.port)
        # A slow peer: a valid hello, then nothing.
        raw.write_raw(frame_of(ClientHello(1, "t", "compute", 1, secrets.token_bytes(32))))
        await _assert_refused(server, rec, raw)
        assert 0.4 <= loop.time() - begin < 3.0
        raw.close()
        raw = await open_raw(server.port)  # silent from the start
        await _assert_refused(server, rec, raw)
        assert server.stats.auth_failures == 2
        raw.close()


async def test_oversize_frames_are_refused_from_the_length_prefix(
    secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder()
    async with await _server(secret, rec) as server:
        # Before authentication: 4 KiB is the limit; the body is never sent.
        raw = await open_raw(server.port)
        raw.write_raw(HEADER.pack(MAGIC, 1, 0, MAX_PRE_AUTH_FRAME_BYTES + 1))
        await _assert_refused(server, rec, raw)
        assert "exceeds the maximum of 4096 before authentication" in caplog.text
        raw.close()
        # After authentication: 64 MiB.
        raw = await authenticated_raw(server.port, secret, epoch=1)
        raw.write_raw(HEADER.pack(MAGIC, 1, 0, 64 * 1024 * 1024 + 1))
        assert await closed_by_peer(raw, within=3.0)
        await asyncio.sleep(0.05)
        assert server.stats.protocol_errors == 1 and rec.commands == []
        assert "exceeds the maximum of 67108864" in caplog.text
        raw.close()


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


async def test_pickle_payload_creates_nothing(secret: bytes, tmp_path: Path) -> None:
    # The payload is live: unpickling it would create the marker.
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_Evil(probe))).close()
    assert probe.exists()

    marker = tmp_path / "marker"
    payload = pickle.dumps(_Evil(marker))
    with pytest.raises(ProtocolError):
        decode_any(payload)
    rec = Recorder()
    async with await _server(secret, rec) as server:
        raw = await open_raw(server.port)  # before authentication
        raw.write_raw(encode_frame(payload))
        await _assert_refused(server, rec, raw)
        raw.close()
        raw = await authenticated_raw(server.port, secret, epoch=1)  # after
        raw.write_raw(encode_frame(payload))
        assert await closed_by_peer(raw, within=3.0)
        await asyncio.sleep(0.05)
        assert server.stats.protocol_errors == 1 and rec.commands == []
        raw.close()
    assert not marker.exists()
    assert os.listdir(tmp_path) == ["probe"]


async def test_secrets_never_reach_logs(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.DEBUG)
    canary = "CANARY-" + secrets.token_hex(16)
    secret = Secret(canary)
    rec = Recorder()
    async with await _server(secret.encode(), rec) as server:
        for wrong in (Secret("WRONG-" + secrets.token_hex(16)), None):
            with pytest.raises(AuthenticationFailed):
                await connect("127.0.0.1", server.port, role="compute", epoch=1, secret=wrong)
        conn = await connect("127.0.0.1", server.port, role="compute", epoch=2, secret=secret)
        run = ingestion(HELLO_ID, [HELLO_ID2])
        pg = RunIngestion(run.id, run.description)
        logging.getLogger("spate.test").info("sending %r / %s", pg, pg)
        await conn.send(HELLO)
        await conn.recv()
        await conn.close()
        raw = await open_raw(server.port)
        raw.write_raw(b"garbage" * 3)
        await closed_by_peer(raw, within=3.0)
        raw.close()
    text = caplog.text
    assert "handshake" in text  # the failures were logged …
    assert canary not in text  # … without the secret
    assert canary.encode().hex() not in text
    assert "pw0" not in text  # the PostgreSQL password inside the Secret
    with pytest.raises(ValueError, match="at least 32") as e:
        await serve("127.0.0.1", 0, role="compute", handler=rec, secret="short-canary")
    assert "short-canary" not in str(e.value)


# --- TLS -------------------------------------------------------------------------------------


async def test_mutual_tls(secret: bytes, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "good")
    rogue = make_pki(tmp_path / "rogue", name="rogue")
    server_ctx = server_tls_context(pki.server.cert, pki.server.key, pki.ca)
    rec = Recorder()
    async with await serve(
        "127.0.0.1", 0, role="compute", secret=secret, handler=rec, tls=server_ctx, options=FAST
    ) as server:
        good = client_tls_context(pki.ca, certfile=pki.client.cert, keyfile=pki.client.key)
        conn = await connect(
            "127.0.0.1",
            server.port,
            role="compute",
            epoch=1,
            secret=secret,
            tls=good,
            server_hostname="localhost",
        )
        await conn.send(HELLO)
        assert await conn.recv() is not None
        big = CreateDataflow(dataflow([GlobalId.user(9)], 1).with_as_of(Antichain.of(1)))
        big = CreateDataflow(replace(big.dataflow, debug_name="x" * 2_000_000))
        await conn.send(big)  # a multi-megabyte frame through TLS
        await conn.send(HELLO)
        assert await asyncio.wait_for(conn.recv(), 10) is not None
        await conn.close()
        assert rec.commands == [HELLO, big, HELLO]

        # A plaintext client against the TLS port fails.
        with pytest.raises((AuthenticationFailed, ConnectionClosed)):
            await connect("127.0.0.1", server.port, role="compute", epoch=2, secret=secret)
        # A client certificate from an unknown CA fails.
        unknown = client_tls_context(pki.ca, certfile=rogue.client.cert, keyfile=rogue.client.key)
        with pytest.raises((AuthenticationFailed, ConnectionClosed)):
            await connect(
                "127.0.0.1",
                server.port,
                role="compute",
                epoch=3,
                secret=secret,
                tls=unknown,
                server_hostname="localhost",
            )
        # No client certificate at all fails.
        anonymous = client_tls_context(pki.ca)
        with pytest.raises((AuthenticationFailed, ConnectionClosed)):
            await connect(
                "127.0.0.1",
                server.port,
                role="compute",
                epoch=4,
                secret=secret,
                tls=anonymous,
                server_hostname="localhost",
            )
        # A server certificate from an unknown CA is refused by the client.
        distrustful = client_tls_context(rogue.ca, certfile=pki.client.cert, keyfile=pki.client.key)
        with pytest.raises(AuthenticationFailed):
            await connect(
                "127.0.0.1",
                server.port,
                role="compute",
                epoch=5,
                secret=secret,
                tls=distrustful,
                server_hostname="localhost",
            )
        await asyncio.sleep(0.1)
        assert rec.commands == [HELLO, big, HELLO] and len(rec.connections) == 1
        assert server.stats.auth_failures >= 3


async def test_tls_without_secret_allows_non_loopback_bind_check(tmp_path: Path) -> None:
    from spate.protocol.transport import check_bind

    pki = make_pki(tmp_path)
    check_bind(
        "10.0.0.1", secret=None, tls=server_tls_context(pki.server.cert, pki.server.key, pki.ca)
    )
