"""``bench/e2e.py --with flink``: Apache Flink (SQL on a local mini-cluster, parallelism 2) as a
peer on the same steps, retractions included, once with ``execution.buffer-timeout`` 0 and
once with Flink's default (100 ms).

PyFlink is not a dependency of spate, and its pins clash with spate's (pyarrow among them), so
it runs in a virtual environment of its own, created on first use under
``$SPATE_BENCH_CACHE`` (default ``~/.cache/spate-bench``) with ``apache-flink`` from the package
index; it needs a Java 11 or 17 runtime on the ``PATH`` (it starts its own JVM, offline). By
hand::

    python -m venv ~/.cache/spate-bench/flink-venv
    ~/.cache/spate-bench/flink-venv/bin/pip install apache-flink==2.3.0

``bench/_flink_peer.py`` runs there on changelog files (JSON lines of signed updates) this
process writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

FLINK = "apache-flink==2.3.0"
PEER = Path(__file__).with_name("_flink_peer.py")
PEER_TIMEOUT_S = 3600
BUFFER_TIMEOUTS = {"bt0": "0 ms", "default": "default"}


def flink_venv_python() -> Path:
    """Where the interpreter of PyFlink's virtual environment is (it may not exist yet)."""
    cache = Path(os.environ.get("SPATE_BENCH_CACHE", Path.home() / ".cache" / "spate-bench"))
    return cache / "flink-venv" / "bin" / "python"


def flink_python() -> Path:
    """The interpreter of PyFlink's virtual environment (created and filled if missing)."""
    python = flink_venv_python()
    venv = python.parent.parent
    if not python.exists():
        print(f"installing {FLINK} into {venv} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", FLINK], check=True)
    return python


def _changelog(path: Path, deletes: Iterable[pa.Table], inserts: Iterable[pa.Table]) -> None:
    """JSON lines of signed updates: each row with ``"diff": -1`` (deleted) or ``1`` (inserted).

    Not Debezium's ``d``/``c`` records: Flink's file source reads the files with two readers and
    no order between files, so a later step's delete can reach the aggregate before the insert
    it retracts, and Flink's changelog aggregates assume their input in order (a group
    aggregate drops a retraction it has no state for; ``MAX`` with retraction keeps a value
    whose count went -1 -> 0 as the max). Summing diffs commutes (``bench/_flink_peer.py``)."""
    with path.open("w") as f:
        for diff, tables in ((-1, deletes), (1, inserts)):
            for table in tables:
                for row in table.to_pylist():
                    f.write(json.dumps({**row, "diff": diff}))
                    f.write("\n")


def flink_peer(
    initial: pa.Table,
    auctions: pa.Table,
    step: Callable[[int], tuple[pa.Table, pa.Table, pa.Table]],
    final: Callable[[], set[tuple[Any, ...]]],
    *,
    marker_auction: int,
    view_rows: int,
    steps: int,
    work: Path,
) -> dict[str, Any]:
    """Write the load and ``2 * steps`` steps (``step(k)``: new, retracted, added bids), run
    the peer once per buffer timeout, and check each final view against ``final()``."""
    python = flink_python()
    base = work / "flink"
    base.mkdir()
    _changelog(base / "auctions.json", [], [auctions])
    _changelog(base / "bids.json", [], [initial])
    for k in range(1, 2 * steps + 1):
        new, old, repl = step(k)
        _changelog(base / f"step-{k}.json", [old], [new, repl])
    expected = final()
    figures: dict[str, Any] = {"flink_version": FLINK.split("==")[1]}
    for name, timeout in BUFFER_TIMEOUTS.items():
        d = base / name
        (d / "bids").mkdir(parents=True)
        (d / "auctions").mkdir()
        (d / "steps").mkdir()
        os.link(base / "auctions.json", d / "auctions" / "auctions.json")
        os.link(base / "bids.json", d / "bids" / "bids.json")
        for k in range(1, 2 * steps + 1):
            os.link(base / f"step-{k}.json", d / "steps" / f"step-{k:05d}.json")
        out = subprocess.run(
            [
                str(python),
                str(PEER),
                str(d),
                str(steps),
                str(marker_auction),
                str(view_rows),
                timeout,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=PEER_TIMEOUT_S,
        )
        lines = [ln for ln in out.stdout.strip().splitlines() if ln.startswith("{")]
        if out.returncode != 0 or not lines:
            raise RuntimeError(f"the Flink peer ({timeout}) failed:\n{out.stderr[-3000:]}")
        got = json.loads(lines[-1])
        p = f"flink_{name}"
        figures[f"{p}_load_s"] = round(got["load_s"], 2)
        figures[f"{p}_visible_p50_ms"] = round(got["visible_p50_ms"], 1)
        figures[f"{p}_visible_p99_ms"] = round(got["visible_p99_ms"], 1)
        figures[f"{p}_sustained_updates_per_s"] = round(got["sustained_updates_per_s"])
        final_rows = {tuple(r) for r in got["final"]}
        figures[f"{p}_final_view_equals_duckdb"] = final_rows == expected
        if final_rows != expected:
            figures[f"{p}_final_view_mismatch"] = (
                f"{len(final_rows)} rows, expected {len(expected)}; extra "
                f"{sorted(final_rows - expected)[:3]}, missing {sorted(expected - final_rows)[:3]}"
            )
            print(figures[f"{p}_final_view_mismatch"], flush=True)
        print(
            f"flink {figures['flink_version']} (parallelism 2, buffer timeout {timeout}): load "
            f"{figures[f'{p}_load_s']} s; write -> visible p50 {figures[f'{p}_visible_p50_ms']} "
            f"ms p99 {figures[f'{p}_visible_p99_ms']} ms; sustained "
            f"{figures[f'{p}_sustained_updates_per_s']:,} updates/s; final view "
            f"{'equals' if figures[f'{p}_final_view_equals_duckdb'] else 'DIFFERS FROM'} DuckDB",
            flush=True,
        )
    return figures
