"""Two replica processes on TCP loopback; one is killed (SIGKILL) during a stream of peeks.

The replicas are scripted stand-ins for the compute replica — real processes, real
authenticated TCP, real kill — so this checks the controller's side of replica failures
"two replicas, kill one": peeks keep being answered by the survivor (p99 < 2 s), every answer
equals the single-replica answer, and the killed replica, restarted on its port, is rehydrated
with the next epoch and reports the same frontiers as the survivor.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.compute.controller import (
    ClientConnector,
    ComputeController,
    ReplicaConfig,
    ReplicaLocation,
)
from spate.compute.controller.replica_client import transport_opener
from spate.ids import GlobalId, InstanceId, PeekId, ReplicaId, SeededIdGen
from spate.protocol.compute import IndexTarget
from spate.testing.process import spate_env

from .fake_replica import rows_at
from .harness import D, index_dataflow
from .storage_double import FakeStorage

pytestmark = pytest.mark.integration

SECRET = "integration-secret-0123456789abcdef"
REPO = Path(__file__).resolve().parents[3]
I1, R1, R2 = InstanceId(1), ReplicaId(1), ReplicaId(2)
S, IDX = GlobalId.user(1), GlobalId.user(2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ReplicaProcess:
    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = spate_env({"SPATE_TEST_SECRET": SECRET})
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env["PYTHONPATH"]])
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.compute.controller.replica_process",
                "--port",
                str(self.port),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("ready"), f"replica process did not start: {line!r}"

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


async def restart_later(p: ReplicaProcess, delay: float) -> None:
    await asyncio.sleep(delay)
    await asyncio.to_thread(p.start)


@pytest.fixture
def replicas() -> Iterator[tuple[ReplicaProcess, ReplicaProcess]]:
    a, b = ReplicaProcess(free_port()), ReplicaProcess(free_port())
    a.start()
    b.start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


async def test_kill_one_of_two_replicas_during_a_stream_of_peeks(
    replicas: tuple[ReplicaProcess, ReplicaProcess],
) -> None:
    a, b = replicas
    storage = FakeStorage()
    storage.add_collection(S, D, since=0, upper=10**12)
    connector = ClientConnector(transport_opener(secret=SECRET), backoff_max_s=0.2)
    ids = SeededIdGen(9)
    controller = ComputeController(
        storage, connector=connector, ids=ids, maintenance_interval_ms=100
    )

    async def drive() -> None:
        while True:
            await controller.ready()
            await controller.process()

    driver = asyncio.create_task(drive())
    loop = asyncio.get_running_loop()
    try:
        controller.create_instance(I1)
        controller.initialization_complete()
        for r, p in ((R1, a), (R2, b)):
            controller.add_replica_to_instance(
                I1, r, ReplicaConfig(ReplicaLocation("127.0.0.1", p.port))
            )
        controller.create_dataflow(I1, index_dataflow(S, IDX, 0))
        async with asyncio.timeout(20):
            while not controller.collection_hydrated(I1, IDX):
                await asyncio.sleep(0.02)

        async def peek_latest() -> float:
            upper = controller.collection_frontiers(IDX).write_frontier.as_option()
            assert upper is not None
            ts = upper - 1
            t0 = loop.time()
            result = await asyncio.wait_for(
                controller.peek(I1, IndexTarget(IDX), PeekId.new(ids), ts, result_desc=D), 10
            )
            assert result == rows_at(ts), f"peek at {ts} answered {result}"
            return loop.time() - t0

        await peek_latest()  # warm up both sides' codecs
        latencies: list[float] = []
        restart: asyncio.Task[None] | None = None
        start = loop.time()
        while loop.time() - start < 5.0:
            elapsed = loop.time() - start
            if restart is None and elapsed > 1.0:
                a.kill()
                restart = asyncio.create_task(restart_later(a, 1.0))
            latencies.append(await peek_latest())
        assert restart is not None
        await restart
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99)]
        print(
            f"{len(latencies)} peeks during the kill: p99 {p99 * 1e3:.0f} ms, max "
            f"{latencies[-1] * 1e3:.0f} ms"
        )
        assert len(latencies) > 50 and p99 < 2.0, f"{len(latencies)} peeks, p99 {p99:.3f} s"

        # The killed replica is back with the next epoch and reports what the survivor reports.
        async with asyncio.timeout(20):
            while True:
                info = controller.replica_info(I1, R1)
                frontiers = controller.collection_info(I1, IDX).replicas
                if (
                    info.epoch == 2
                    and info.health == "connected"
                    and frontiers[R1].hydrated
                    and frontiers[R1].write_frontier.as_option()
                    >= frontiers[R2].write_frontier.as_option() - 50  # type: ignore[operator]
                ):
                    break
                await asyncio.sleep(0.05)
        assert controller.replica_info(I1, R2).epoch == 1
        assert controller.replica_info(I1, R1).failures == 1
    finally:
        driver.cancel()
        controller.shutdown()
        await connector.close()
