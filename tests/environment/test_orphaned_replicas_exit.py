"""Replicas of an environment whose process died without ``close()`` exit on their own after
the grace period, Spark JVM included; ``spate stop`` stops those of a closed environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

GRACE_S = 5.0

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from spate.config import Settings
    from spate.environment.api import Environment
    from spate.plan.builder import col
    from spate.repr.desc import RelationDesc
    from spate.repr.types import INT64

    data = Path(sys.argv[1])
    settings = Settings(data_dir=data, replicas={"grace_period_s": float(sys.argv[2])},
                        spark={"master": "local[1]", "driver_memory": "512m"})
    env = Environment.open(data, settings=settings)
    env.create_cluster("c", replicas=["r1"])
    env.create_table("t", RelationDesc.of(("a", INT64, False)))
    env.insert("t", [(1,), (2,)])
    env.create_materialized_view("v", env.get("t").filter(col("a") > 1), cluster="c")
    assert env.select("v", timeout=240).num_rows == 1   # the replica's Spark driver runs
    print("ready", flush=True)
    time.sleep(3600)
    """
)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def test_a_killed_script_leaves_no_replica_or_jvm_after_the_grace_period(tmp_path: Path) -> None:
    data = tmp_path / "data"
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(data), str(GRACE_S)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", proc.stderr.read() if proc.stderr else ""
        pid = int((data / "services" / "c-r1" / "pid").read_text())
        procs = _tree(pid)
        assert any("java" in " ".join(p.cmdline()) for p in procs), "no Spark JVM under replica"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed_at = time.monotonic()
        time.sleep(GRACE_S / 2)
        assert _alive(procs), "the replica exited before its grace period passed"
        while _alive(procs) and time.monotonic() - killed_at < GRACE_S + 60:
            time.sleep(0.5)
        left = _alive(procs)
        assert not left, f"still running {GRACE_S + 60:.0f} s after the kill: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run([sys.executable, "-m", "spate", "stop", str(data)], check=False)


def test_spate_stop_stops_the_replicas_of_a_closed_environment(tmp_path: Path) -> None:
    from spate.environment.api import Environment

    data = tmp_path / "data"
    env = Environment.open(data, spark_master="local[1]")
    try:
        env.create_cluster("c", replicas=["r1", "r2"])
        deadline = time.monotonic() + 60
        while any(r.process != "online" for r in env.status().replicas):
            assert time.monotonic() < deadline, env.status().replicas
            time.sleep(0.2)
        pids = [int((data / "services" / f"c-{r}" / "pid").read_text()) for r in ("r1", "r2")]
    finally:
        env.close(stop_replicas=False)
    procs = [p for pid in pids for p in _tree(pid)]
    assert len(_alive(procs)) >= 2
    out = subprocess.run(
        [sys.executable, "-m", "spate", "stop", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == sorted(
        f"stopped c-{r} (pid {pid})" for r, pid in zip(("r1", "r2"), pids, strict=True)
    )
    assert not _alive(procs)
    again = subprocess.run(
        [sys.executable, "-m", "spate", "stop", str(data)], capture_output=True, text=True
    )
    assert again.returncode == 0
    assert again.stdout.strip() == f"no replica process of {data} is running"
