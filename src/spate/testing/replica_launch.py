"""Launching a local compute replica process (tests, benchmarks, local tools).

:func:`start_replica` runs ``spate replica --role compute`` as a child with a fresh secret,
waits for its readiness line and returns a :class:`ReplicaProcess` to connect a
:class:`~spate.testing.replica_driver.ComputeDriver`, read its Prometheus metrics, or stop it.
The child runs in its own session (process group), so ``kill(hard=True)`` ends it and its
Spark JVM at once (``SIGKILL`` to the group: a ``kill -9``). Production replicas are started by
the orchestrator (:mod:`spate.orchestrator`) with the same command line.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from spate.compute.replica.main import READY_LINE
from spate.orchestrator.process import allocate_port
from spate.persist import PersistLocation
from spate.testing.process import spate_argv, spate_env
from spate.testing.replica_driver import ComputeDriver

STARTUP_TIMEOUT_S: Final = 120.0


@dataclass
class ReplicaProcess:
    name: str
    proc: subprocess.Popen[str]
    secret: bytes
    log: Path
    metrics_port: int
    host: str = ""
    port: int = 0
    lines: list[str] = field(default_factory=list)

    async def driver(self, epoch: int) -> ComputeDriver:
        return await ComputeDriver.connect(self.host, self.port, epoch=epoch, secret=self.secret)

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of one of this replica's Prometheus series (``None`` if absent)."""
        return scrape_metric(self.metrics_port, name, **labels)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def kill(self, *, hard: bool) -> None:
        """SIGKILL (hard) or SIGTERM the process group of this replica."""
        if self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGKILL if hard else signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text().splitlines()[-n:])
        except OSError:
            return ""


def scrape_metric(port: int, name: str, **labels: str) -> float | None:
    """The value of one Prometheus series served on ``127.0.0.1:port`` (``None`` if absent)."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    want = sorted(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            series, _, value = line.rpartition(" ")
            got = series[len(name) :].strip("{}")
            if sorted(got.split(",") if got else []) == want:
                return float(value)
    return None


def replica_argv(
    *,
    listen: str,
    secret_file: str,
    scratch_dir: str,
    location: PersistLocation,
    name: str,
    metrics_port: str,
    spark_master: str = "local[1]",
    driver_memory: str = "512m",
) -> list[str]:
    """The command line of a compute replica (placeholders such as ``{port:listen}`` pass)."""
    return spate_argv(
        "replica",
        "--role",
        "compute",
        "--listen",
        listen,
        "--secret-file",
        secret_file,
        "--scratch-dir",
        scratch_dir,
        "--persist-blob",
        location.blob_uri,
        "--persist-consensus",
        location.consensus_uri,
        "--replica-id",
        name,
        "--metrics-port",
        metrics_port,
        "--spark-master",
        spark_master,
        "--driver-memory",
        driver_memory,
    )


def start_replica(
    name: str,
    root: Path,
    location: PersistLocation,
    *,
    spark_master: str = "local[1]",
    driver_memory: str = "512m",
    env: dict[str, str] | None = None,
) -> ReplicaProcess:
    """Start ``spate replica --role compute`` (files under ``root``) and wait until it listens."""
    root.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(32).encode()
    secret_file = root / f"{name}.secret"
    secret_file.write_text(secret.decode())
    secret_file.chmod(0o600)
    log = root / f"{name}.log"
    metrics_port = allocate_port("127.0.0.1")
    argv = replica_argv(
        listen="127.0.0.1:0",
        secret_file=str(secret_file),
        scratch_dir=str(root / f"{name}-scratch"),
        location=location,
        name=name,
        metrics_port=str(metrics_port),
        spark_master=spark_master,
        driver_memory=driver_memory,
    )
    with open(log, "w") as err:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            argv,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=spate_env(env),
            start_new_session=True,
        )
    r = ReplicaProcess(name, proc, secret, log, metrics_port)
    ready = threading.Event()

    def read_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            r.lines.append(line.rstrip())
            if line.startswith(READY_LINE):
                host, _, port = line[len(READY_LINE) :].strip().rpartition(":")
                r.host, r.port = host, int(port)
                ready.set()

    threading.Thread(target=read_stdout, daemon=True).start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not ready.wait(0.1):
        if proc.poll() is not None or time.monotonic() > deadline:
            r.kill(hard=True)
            raise RuntimeError(f"replica {name} did not start:\n{r.log_tail()}")
    return r
