"""A replica placed elsewhere and reached over mutual TLS (``[tls]`` settings on the
environment, ``spate replica --tls-cert/--tls-key/--tls-ca`` on the replica): certificates
authenticate both sides, no shared secret is needed, and a peer without a certificate the CA
signed is refused before any command."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spate.config import Settings
from spate.environment.api import Environment
from spate.environment.layout import Layout
from spate.environment.services import compute_replica_service
from spate.errors import SpateError
from spate.orchestrator.process import allocate_port
from spate.persist.location import PersistLocation
from spate.plan.builder import col
from spate.protocol.tls import client_tls_context
from spate.protocol.transport import connect
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64
from spate.testing.certs import Pki, make_pki

_REFUSED = ("AuthenticationFailed", "ConnectionClosed")
"""Under TLS 1.3 the server checks the client's certificate after the client's side of the
handshake is done: the client sees either the alert or the connection closing."""

T = RelationDesc.of(("a", INT64, False), ("b", INT64, False))


def _tls_settings(pki: Pki) -> Settings:
    return Settings(
        tls={"ca_file": pki.ca, "cert_file": pki.client.cert, "key_file": pki.client.key}
    )


def _refused(port: int, tls: object) -> str:
    async def attempt() -> str:
        try:
            conn = await connect("127.0.0.1", port, role="compute", epoch=10**9, tls=tls)  # type: ignore[arg-type]
        except SpateError as e:
            return type(e).__name__
        await conn.close()
        return "connected"

    return asyncio.run(attempt())


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_tls_settings_need_all_three_files(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    with pytest.raises(ValueError, match="missing \\['key_file'\\]"):
        Settings(tls={"ca_file": pki.ca, "cert_file": pki.client.cert})
    with pytest.raises(ValueError, match="is not a readable file"):
        Settings(tls={"ca_file": tmp_path / "nope", "cert_file": pki.ca, "key_file": pki.ca})
    assert not Settings().tls.enabled and _tls_settings(pki).tls.enabled


def test_the_command_shown_for_a_placed_replica_carries_tls_flags(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    layout = Layout(tmp_path / "data")
    placed = compute_replica_service(
        layout, _tls_settings(pki), cluster="c", replica="u1", address="10.0.0.8:6875"
    ).argv
    assert "--tls-cert" in placed and "--tls-ca" in placed and "--secret-file" not in placed
    local = compute_replica_service(layout, _tls_settings(pki), cluster="c", replica="u1").argv
    assert "--secret-file" in local and "--tls-cert" not in local  # loopback keeps the secret
    both = Settings(tls={**_tls_settings(pki).tls.model_dump(), "with_secret": True})
    shown = compute_replica_service(layout, both, cluster="c", replica="u1", address="h:1").argv
    assert "--tls-cert" in shown and "--secret-file" in shown


def test_replica_cli_refuses_partial_tls_flags(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "spate", "replica", "--role", "compute",
         "--listen", "0.0.0.0:0", "--scratch-dir", str(tmp_path / "s"),
         "--tls-cert", str(pki.server.cert)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"},
    )  # fmt: skip
    assert out.returncode != 0
    assert "missing ['--tls-key', '--tls-ca']" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_placed_replica_is_reached_over_mutual_tls_without_the_secret(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    rogue = make_pki(tmp_path / "rogue", name="rogue")
    data = tmp_path / "data"
    port = allocate_port("127.0.0.1")
    loc = PersistLocation.embedded(data)
    argv = [
        sys.executable, "-m", "spate", "replica", "--role", "compute",
        "--listen", f"127.0.0.1:{port}",
        "--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key),
        "--tls-ca", str(pki.ca),
        "--scratch-dir", str(tmp_path / "scratch"), "--blob-uri", loc.blob_uri,
        "--consensus-uri", loc.consensus_uri, "--spark-master", "local[1]",
        "--driver-memory", "512m", "--grace-period", "120",
    ]  # fmt: skip
    env = Environment.open(data, settings=_tls_settings(pki), spark_master="local[1]")
    log = open(tmp_path / "replica.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not _listening(port):
            assert proc.poll() is None, (tmp_path / "replica.log").read_text()
            assert time.monotonic() < deadline, "the replica did not listen"
            time.sleep(0.2)

        # Without a certificate the CA signed, nothing gets past the TLS handshake.
        assert _refused(port, None) != "connected"  # plain TCP, no TLS at all
        anonymous = client_tls_context(pki.ca)
        assert _refused(port, anonymous) in _REFUSED
        stranger = client_tls_context(pki.ca, certfile=rogue.client.cert, keyfile=rogue.client.key)
        assert _refused(port, stranger) in _REFUSED

        env.create_cluster("c", replicas={"r1": f"127.0.0.1:{port}"})
        env.create_table("t", T)
        env.insert("t", [(1, 10), (2, 20), (3, 30)])
        env.create_materialized_view("big", env.get("t").filter(col("b") > 15), cluster="c")
        rows = env.select("big", timeout=240).to_pylist()
        assert sorted(rows, key=str) == [{"a": 2, "b": 20}, {"a": 3, "b": 30}]
        (r1,) = env.status().replicas
        assert (r1.process, r1.health) == (f"at 127.0.0.1:{port}", "connected")
    finally:
        env.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
