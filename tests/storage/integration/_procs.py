"""Real storage replica processes (``spate replica --role storage``) and a pumped controller."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from spate.clock import SystemClock
from spate.ids import SystemIdGen
from spate.persist.client import PersistClient
from spate.persist.location import PersistLocation
from spate.protocol.secret import Secret
from spate.storage.controller import StorageController, StorageReplicaLocation
from spate.testing.process import spate_argv, spate_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ReplicaProcess:
    """A storage replica process on a fixed port, restartable after a kill -9."""

    location: PersistLocation
    directory: Path
    port: int = field(default_factory=free_port)
    secret: Secret = field(default_factory=Secret.generate)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    _log: IO[bytes] | None = None

    @property
    def address(self) -> StorageReplicaLocation:
        return StorageReplicaLocation("127.0.0.1", self.port, self.secret)

    def start(self, timeout: float = 60.0) -> None:
        secret_file = self.directory / "secret"
        secret_file.write_text(self.secret.reveal())
        secret_file.chmod(0o600)
        self.starts += 1
        self._log = open(self.directory / f"replica-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            spate_argv(
                "replica",
                "--role",
                "storage",
                "--port",
                str(self.port),
                "--blob-uri",
                self.location.blob_uri,
                "--consensus-uri",
                self.location.consensus_uri,
                "--secret-file",
                str(secret_file),
            ),
            env=spate_env(),
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if b"listening on" in line:
                return
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError(f"replica did not start; see {self.directory}/replica-{self.starts}.log")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()


@asynccontextmanager
async def pumped(controller: StorageController) -> AsyncIterator[StorageController]:
    """Run the controller's ready/process loop in the background."""
    failure: list[BaseException] = []

    async def loop() -> None:
        try:
            while True:
                await controller.ready()
                await controller.process()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            failure.append(e)
            raise

    task = asyncio.create_task(loop())
    try:
        yield controller
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    if failure:
        raise failure[0]


async def wait_for(pred: Callable[[], Any], timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what or pred}")
        await asyncio.sleep(0.05)


def persist_client(location: PersistLocation) -> PersistClient:
    return PersistClient(location, clock=SystemClock(), ids=SystemIdGen())
