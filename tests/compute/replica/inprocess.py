"""An in-process compute replica on loopback TCP, sharing the test session's SparkSession."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spate.compute.replica.main import serve_compute_replica
from spate.persist import PersistLocation
from spate.testing.replica_driver import ComputeDriver

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class RunningReplica:
    host: str
    port: int
    secret: bytes
    task: asyncio.Task[int]
    stop: asyncio.Event

    async def driver(self, epoch: int) -> ComputeDriver:
        return await ComputeDriver.connect(self.host, self.port, epoch=epoch, secret=self.secret)


@contextlib.asynccontextmanager
async def replica(
    spark: SparkSession, scratch: Path, location: PersistLocation | None, *, name: str = "r1"
) -> AsyncIterator[RunningReplica]:
    secret = secrets.token_bytes(32)
    stop = asyncio.Event()
    ready: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve_compute_replica(
            listen=("127.0.0.1", 0),
            secret=secret,
            scratch=scratch,
            spark=lambda: spark,
            location=location,
            name=name,
            stop=stop,
            on_listening=lambda h, p: ready.set_result((h, p)),
        )
    )
    done, _ = await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()
    host, port = ready.result()
    running = RunningReplica(host, port, secret, task, stop)
    try:
        yield running
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
