"""Replicas started elsewhere (``spate replica --listen``) and placed with
``create_cluster(replicas={"r1": "host:port"})``: connected, supervised, rehydrated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.orchestrator.process import allocate_port
from spate.persist.location import PersistLocation
from spate.plan.builder import col
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

T = RelationDesc.of(("a", INT64, False), ("b", INT64, False))


class Placed:
    """A compute replica started by hand, as on another host."""

    def __init__(self, data: Path, port: int, scratch: Path) -> None:
        loc = PersistLocation.embedded(data)
        self.argv = [
            sys.executable, "-m", "spate", "replica", "--role", "compute",
            "--listen", f"127.0.0.1:{port}", "--secret-file", str(data / "secret"),
            "--scratch-dir", str(scratch), "--blob-uri", loc.blob_uri,
            "--consensus-uri", loc.consensus_uri, "--spark-master", "local[1]",
            "--driver-memory", "512m",
        ]  # fmt: skip
        self.log = scratch.parent / f"{scratch.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log, start_new_session=True)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def placed(tmp_path: Path) -> Iterator[tuple[Path, int, Placed]]:
    data = tmp_path / "data"
    port = allocate_port("127.0.0.1")
    replica = Placed(data, port, tmp_path / "scratch")
    try:
        yield data, port, replica
    finally:
        replica.kill()


def wait_for(cond: object, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_placed_replica_is_connected_supervised_and_rehydrated(
    placed: tuple[Path, int, Placed],
) -> None:
    data, port, replica = placed
    env = Environment.open(data, spark_master="local[1]")  # creates the transport secret
    try:
        replica.start()
        env.create_cluster("c", replicas={"r1": f"127.0.0.1:{port}"})
        env.create_table("t", T)
        env.insert("t", [(1, 10), (2, 20), (3, 30)])
        env.create_materialized_view("big", env.get("t").filter(col("b") > 15), cluster="c")
        env.create_index("big_by_a", on="big", key=["a"], cluster="c")
        assert sorted(env.select("big", timeout=240).to_pylist(), key=str) == [
            {"a": 2, "b": 20},
            {"a": 3, "b": 30},
        ]
        (r1,) = env.status().replicas
        assert (r1.process, r1.health) == (f"at 127.0.0.1:{port}", "connected")
        assert not (data / "services" / "c-r1").exists()  # nothing runs locally

        # The replica's host loses its process; a new one starts there; the controller
        # reconnects and rehydrates it, and reads go on.
        replica.kill()
        env.insert("t", [(4, 40)])
        wait_for(lambda: env.status().replicas[0].health != "connected", "the disconnect")
        replica.start()
        assert env.select("big", timeout=240).num_rows == 3
        wait_for(lambda: env.status().replicas[0].hydrated == 2, "rehydration", 240)
    finally:
        env.close()

    # Reopened: the placement is durable, the same replica is adopted over the network.
    env = Environment.open(data, spark_master="local[1]")
    try:
        env.insert("t", [(5, 50)])
        assert env.select("big", timeout=240).num_rows == 4
        (r1,) = env.status().replicas
        assert r1.process == f"at 127.0.0.1:{port}"
        env.drop_replica("c", "r1")
        assert env.status().replicas == ()
        assert replica.proc is not None and replica.proc.poll() is None  # not ours to stop
    finally:
        env.close()


def test_a_non_loopback_listen_without_a_secret_is_refused(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "spate", "replica", "--role", "compute",
         "--listen", "0.0.0.0:0", "--scratch-dir", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode != 0
    assert "refusing to listen on '0.0.0.0' without a secret or TLS" in out.stderr
    assert "Traceback" not in out.stderr
