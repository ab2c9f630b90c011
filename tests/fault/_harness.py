"""What the fault tests share: starting a worker process on a data directory, its fsynced
journal (one JSON record a line), waiting for it to be ready, and finding and killing every
process of a data directory."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]


def start_worker(
    module: str, data: Path, journal: Path, seed: int, n: int, log: Path
) -> subprocess.Popen[bytes]:
    """``python -m module DATA JOURNAL SEED N`` from the repository, stderr into ``log``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    with open(log, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", module, str(data), str(journal), str(seed), str(n)],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def read_journal(journal: Path) -> list[dict[str, object]]:
    """The journal's records (none yet if it does not exist)."""
    out = []
    if not journal.exists():
        return out
    for line in journal.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a killed worker's last line
            out.append(json.loads(line))
    return out


def wait_ready(
    journal: Path, key: str, n: int, proc: subprocess.Popen[bytes], within: float
) -> dict[str, object]:
    """The ``ready`` record whose ``key`` is ``n``, once the worker has journaled it."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for r in read_journal(journal):
            if r.get("op") == "ready" and r.get(key) == n:
                return r
        if proc.poll() is not None:
            raise AssertionError(f"the worker of {key} {n} exited with {proc.returncode}")
        time.sleep(0.2)
    raise AssertionError(f"the worker of {key} {n} was not ready within {within} s")


def processes_of(data: Path) -> list[psutil.Process]:
    """Every process whose command line names ``data``."""
    mine = []
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if any(str(data) in part for part in p.info["cmdline"] or []):
                mine.append(p)
    return mine


def kill_tree(p: psutil.Process) -> None:
    """SIGKILL ``p`` and its children."""
    with contextlib.suppress(psutil.NoSuchProcess):
        for q in [*p.children(recursive=True), p]:
            q.kill()
