"""The processes of the pipeline tests: ``spate pipeline serve`` started and ready, and the
processes a data directory's environment started (its replicas and their children)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest


def started_serve(spec: Path, data: Path, *options: str) -> tuple[subprocess.Popen[str], str]:
    """``spate pipeline serve`` of ``spec`` on a free port, once it serves PostgreSQL clients
    (its stderr kept drained from then on), and the DSN to reach it. The caller stops it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "spate", "pipeline", "serve", str(spec), "--data-dir", str(data),
         "--listen", f"127.0.0.1:{port}", *options],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        if "serving PostgreSQL clients" in line:
            break
    else:
        pytest.fail(f"serve exited {proc.wait()}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
    return proc, f"postgresql://spate@127.0.0.1:{port}/spate"


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def processes_of(data: Path) -> dict[int, str]:
    """pid → command line of every live process whose command names ``data`` (a replica),
    and of every process in a replica's process group (its Spark driver's JVM)."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    found = {pid: cmd for pid in pids if str(data) in (cmd := _cmdline(pid))}
    groups = {g for pid in found if (g := _pgid(pid)) is not None and g != os.getpgid(0)}
    for pid in pids:
        if pid not in found and _pgid(pid) in groups:
            found[pid] = _cmdline(pid)
    return {pid: cmd for pid, cmd in found.items() if cmd and _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def wait_gone(data: Path, timeout: float = 15.0) -> dict[int, str]:
    """The processes of ``data`` still alive after up to ``timeout`` seconds (none, if all
    ended)."""
    deadline = time.monotonic() + timeout
    while (left := processes_of(data)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
