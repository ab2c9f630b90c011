"""Authentication and TLS: SCRAM-SHA-256 with psycopg, asyncpg and psql; refusals."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psycopg
import pytest

from spate.pgwire.auth import (
    AuthConfigError,
    AuthFailed,
    ScramExchange,
    ScramVerifier,
    is_loopback,
    read_password,
)
from spate.pgwire.server import Server, ServerConfig, ServerThread
from tests.pgwire.fake_engine import FakeEngine

PASSWORD = "correct horse battery staple"


@pytest.fixture
def scram_server() -> Iterator[ServerThread]:
    s = ServerThread(FakeEngine(), ServerConfig(port=0, password=PASSWORD))
    try:
        yield s
    finally:
        s.close()


def _dsn(port: int, password: str | None, sslmode: str = "disable") -> str:
    pw = f" password='{password}'" if password is not None else ""
    return f"host=127.0.0.1 port={port} user=alice dbname=spate sslmode={sslmode}{pw}"


def test_scram_accepts_the_password(scram_server: ServerThread) -> None:
    with psycopg.connect(_dsn(scram_server.port, PASSWORD), autocommit=True) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_scram_refuses_a_wrong_or_missing_password(scram_server: ServerThread) -> None:
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(_dsn(scram_server.port, "wrong"))
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(_dsn(scram_server.port, None))
    # The server keeps serving.
    with psycopg.connect(_dsn(scram_server.port, PASSWORD)) as c:
        assert c.execute("SELECT 2").fetchone() == (2,)


async def test_asyncpg_scram(scram_server: ServerThread) -> None:
    url = f"postgresql://alice@127.0.0.1:{scram_server.port}/spate?sslmode=disable"
    conn = await asyncpg.connect(url, password=PASSWORD)
    try:
        assert await conn.fetchval("SELECT 3") == 3
    finally:
        await conn.close()
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(url, password="nope")


@pytest.mark.skipif(shutil.which("psql") is None, reason="the psql binary is not installed")
def test_psql_scram(scram_server: ServerThread) -> None:
    args = ["psql", "-X", "-h", "127.0.0.1", "-p", str(scram_server.port), "-U", "alice",
            "-d", "spate", "-c", "SELECT 4"]  # fmt: skip
    env = dict(os.environ, PGSSLMODE="disable", PGPASSWORD=PASSWORD)
    ok = subprocess.run(args, env=env, capture_output=True, text=True, timeout=20, check=False)
    assert ok.returncode == 0 and " 4" in ok.stdout
    env["PGPASSWORD"] = "bad"
    bad = subprocess.run(args, env=env, capture_output=True, text=True, timeout=20, check=False)
    assert bad.returncode == 2 and "password authentication failed" in bad.stderr


def test_non_loopback_listen_without_password_is_refused() -> None:
    with pytest.raises(AuthConfigError, match="needs a password"):
        Server(FakeEngine(), ServerConfig(host="0.0.0.0", port=0))
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def test_password_from_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "pw"
    f.write_text("s3cret\n")
    assert read_password(file=f, env=None) == "s3cret"
    monkeypatch.setenv("SPATE_TEST_PW", "from-env")
    assert read_password(file=None, env="SPATE_TEST_PW") == "from-env"
    with pytest.raises(AuthConfigError):
        read_password(file=tmp_path / "missing", env=None)
    monkeypatch.delenv("SPATE_TEST_PW")
    with pytest.raises(AuthConfigError):
        read_password(file=None, env="SPATE_TEST_PW")


def test_scram_exchange_rejects_a_forged_proof() -> None:
    v = ScramVerifier.from_password("pw", salt=b"0123456789abcdef")
    ex = ScramExchange(v, nonce="servernonce")
    first = ex.first(b"n,,n=,r=clientnonce").decode()
    assert first.startswith("r=clientnonceservernonce,s=")
    with pytest.raises(AuthFailed):
        ex.final(b"c=biws,r=clientnonceservernonce,p=" + b"A" * 44)
    with pytest.raises(AuthFailed):
        ScramExchange(v).first(b"p=tls-server-end-point,,n=,r=x")


@pytest.fixture
def tls_context(tmp_path: Path) -> ssl.SSLContext:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=localhost"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def test_tls_with_sslmode_require(tls_context: ssl.SSLContext) -> None:
    s = ServerThread(FakeEngine(), ServerConfig(port=0, password=PASSWORD, ssl_context=tls_context))
    try:
        with psycopg.connect(_dsn(s.port, PASSWORD, "require")) as c:
            assert c.info.pgconn.ssl_in_use
            assert c.execute("SELECT 5").fetchone() == (5,)
    finally:
        s.close()


def test_bytes_sent_in_the_clear_after_an_ssl_request_are_refused(
    tls_context: ssl.SSLContext,
) -> None:
    """What a client (or a man in the middle) sends after SSLRequest but before the TLS
    handshake must not be read as if it had come over TLS: the server refuses, with 08P01."""
    s = ServerThread(FakeEngine(), ServerConfig(port=0, password=PASSWORD, ssl_context=tls_context))
    try:
        ssl_request = struct.pack("!ii", 8, 80877103)
        params = b"user\0alice\0database\0spate\0\0"
        startup = struct.pack("!ii", 8 + len(params), 196608) + params
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as sock:
            sock.sendall(ssl_request + startup)  # in one segment: buffered when S would go
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
        assert answer[:1] == b"E", answer  # an ErrorResponse, never 'S'
        assert b"C08P01" in answer and b"unencrypted data after SSL request" in answer
    finally:
        s.close()


def test_a_non_loopback_peer_without_a_password_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import spate.pgwire.startup as startup

    s = ServerThread(FakeEngine(), ServerConfig(port=0))
    try:
        # The server listens on loopback only; make the peer look remote.
        monkeypatch.setattr(startup, "is_loopback", lambda host: False)
        with pytest.raises(psycopg.OperationalError, match="only loopback clients are trusted"):
            psycopg.connect(f"host=127.0.0.1 port={s.port} user=x dbname=spate sslmode=disable")
    finally:
        s.close()
