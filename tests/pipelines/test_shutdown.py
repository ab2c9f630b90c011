"""Stopping: ``spate pipeline serve`` exits promptly on SIGINT and on SIGTERM while SUBSCRIBE
clients are connected and files stream in, leaving no process behind; and
``Environment.close()`` stops a replica a ``spate pipeline run`` kept running.

Real processes: the ``spate`` command, its replica processes (with their Spark drivers),
psycopg clients over pgwire. Without the fixes, serve hung at exit (a Parquet write's reads
left waiting on the closed environment held the process until their 600 s timeout) and the
replica a run kept (started with another grace period, so not adopted) outlived close().
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests.pipelines._example import Inputs, pipeline_seed, write_pipeline
from tests.pipelines._processes import processes_of, started_serve, wait_gone

EXIT_WITHIN_S = 30.0


def _pipeline(tmp_path: Path) -> tuple[Path, Path, Inputs]:
    root = tmp_path / "p"
    root.mkdir()
    spec = write_pipeline(root)
    inputs = Inputs(root, pipeline_seed(20261208))
    inputs.first()
    return spec, tmp_path / "spate", inputs


def _run(spec: Path, data: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "spate", "pipeline", "run", str(spec), "--data-dir", str(data)],
        check=True, timeout=900,
    )  # fmt: skip


def _serve_then_stop(spec: Path, data: Path, inputs: Inputs, sig: signal.Signals) -> None:
    """Serve; a client SUBSCRIBEs over pgwire while files stream in and the datasets'
    Parquet is rewritten continuously; ``sig`` must end the process within EXIT_WITHIN_S."""
    proc, dsn = started_serve(spec, data, "--interval", "0.1", "--outputs-every", "0.1")
    try:
        fetching, copying = psycopg.connect(dsn), psycopg.connect(dsn)  # closed by the server
        try:
            fetching.execute("DECLARE s CURSOR FOR SUBSCRIBE gold_regions")
            assert fetching.execute("FETCH ALL s WITH (timeout = '1s')").fetchall()

            def copy() -> None:  # a client streaming changes until the server goes
                try:
                    with copying.cursor().copy("COPY (SUBSCRIBE bronze_orders) TO STDOUT") as c:
                        for _ in c:
                            pass
                except psycopg.Error:
                    pass

            threading.Thread(target=copy, daemon=True).start()
            for _ in range(10):  # new files: the datasets change, their Parquet is rewritten
                inputs.orders()
                fetching.execute("FETCH ALL s WITH (timeout = '0.3s')")
            started = time.monotonic()
            proc.send_signal(sig)
            try:
                code = proc.wait(EXIT_WITHIN_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"serve did not exit within {EXIT_WITHIN_S} s of {sig.name}")
            print(f"{sig.name}: serve exited {code} after {time.monotonic() - started:.1f} s")
            assert code == 0
        finally:
            fetching.close()
            copying.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    left = wait_gone(data)
    assert not left, f"processes left after serve stopped on {sig.name}: {left}"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_serve_stops_promptly_with_subscribers_and_leaves_no_process(tmp_path: Path) -> None:
    spec, data, inputs = _pipeline(tmp_path)
    _run(spec, data)  # leaves its replica running: serve adopts it, and must stop it
    kept = processes_of(data)
    assert kept, "the run kept no replica"
    _serve_then_stop(spec, data, inputs, signal.SIGINT)
    _serve_then_stop(spec, data, inputs, signal.SIGTERM)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_close_stops_the_replica_a_pipeline_run_kept(tmp_path: Path) -> None:
    from spate.environment.api import Environment

    spec, data, _ = _pipeline(tmp_path)
    _run(spec, data)  # its replica waits an hour for the next run (--keep-for 3600)
    kept = processes_of(data)
    assert kept, "the run kept no replica"
    env = Environment.open(data)  # the default settings: another grace period
    assert "gold_regions" in env.names()
    env.close()
    left = wait_gone(data)
    assert not left, f"processes left after close(): {left}"
