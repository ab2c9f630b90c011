"""A replica flooded with unauthenticated connections, each announcing a 1 MiB frame, stays
small and keeps serving its controller (a real storage replica process, real sockets)."""

from __future__ import annotations

import asyncio
import json
import struct
import time
from pathlib import Path

import psutil
import pytest

from spate.environment.api import Environment
from spate.protocol.frame import MAGIC
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

FLOOD = 1000
MIB = 1024 * 1024


def _upper(env: Environment) -> int:
    return env.status().collection("counter_counter").upper.as_option() or 0


def _storage_replica(data: Path) -> tuple[int, int]:
    """The storage replica's pid and listening port."""
    for sdir in (data / "services").iterdir():
        pid_file = sdir / "pid"
        if (sdir / "ports.json").exists() and pid_file.exists():
            (port,) = json.loads((sdir / "ports.json").read_text()).values()
            return int(pid_file.read_text()), int(port)
    raise AssertionError("no storage replica service found")


async def _flood(port: int, proc: psutil.Process, hold_s: float) -> tuple[int, int]:
    """Open FLOOD connections: half announce a 1 MiB body and send part of it, half send
    nothing; return (peak RSS while they are open, how many the replica closed)."""
    header = struct.pack(">2sBBI", MAGIC, 1, 0, MIB)
    writers = []
    for i in range(FLOOD):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            continue
        if i % 2 == 0:
            writer.write(header + b"\0" * 4000)
        writers.append((reader, writer))
    peak = 0
    deadline = time.monotonic() + hold_s
    while time.monotonic() < deadline:
        peak = max(peak, proc.memory_info().rss)
        await asyncio.sleep(0.05)
    closed = sum(1 for r, _ in writers if r.at_eof() or r.exception() is not None)
    for _, w in writers:
        w.close()
    return peak, closed


def test_unauthenticated_connections_cannot_exhaust_replica_memory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = Environment.open(data)
    try:
        env.create_source(
            "counter", LoadGeneratorSource(LoadGenerator.COUNTER, tick_interval_ms=100)
        )
        # A source's upper starts at its creation time, before the replica has ingested
        # anything: wait until the replica has moved it on for a while (its code and libraries
        # loaded), so that the baseline is a working replica's.
        deadline = time.monotonic() + 60
        first = _upper(env)
        while _upper(env) < first + 2_000:
            assert time.monotonic() < deadline, "the counter source never advanced"
            time.sleep(0.2)
        pid, port = _storage_replica(data)
        proc = psutil.Process(pid)
        baseline = proc.memory_info().rss
        peak, closed = asyncio.run(_flood(port, proc, hold_s=3.0))
        grown = (peak - baseline) / MIB
        print(
            f"baseline {baseline / MIB:.1f} MiB, peak {peak / MIB:.1f} MiB, "
            f"grown {grown:.1f} MiB, closed by the replica {closed}/{FLOOD}"
        )
        assert grown < 64, f"the replica grew {grown:.1f} MiB under {FLOOD} connections"
        # The controller's connection still works: the source keeps moving.
        before = _upper(env)
        deadline = time.monotonic() + 30
        while _upper(env) <= before:
            assert time.monotonic() < deadline, "the storage replica stopped serving"
            time.sleep(0.2)
        assert proc.is_running()
    finally:
        env.close()
