"""``bench/e2e.py --with pathway``: Pathway (an incremental engine with a Python API and a Rust
core) as a peer on the same steps, retractions included.

Pathway is not a dependency of spate, and its own pins clash with spate's (pyarrow among them),
so it runs in a virtual environment of its own, created on first use under
``$SPATE_BENCH_CACHE`` (default ``~/.cache/spate-bench``) with Pathway 0.33.0 from the package
index; ``bench/_pathway_peer.py`` runs there on step files this process writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

PATHWAY = "pathway==0.33.0"
PEER = Path(__file__).with_name("_pathway_peer.py")
# The peer runs a few steps on a few hundred thousand rows: minutes at worst. A pipeline that
# died inside Pathway would otherwise leave the bench waiting for ever.
PEER_TIMEOUT_S = 1800


def pathway_python() -> Path:
    """The interpreter of Pathway's virtual environment (created and filled if missing)."""
    cache = Path(os.environ.get("SPATE_BENCH_CACHE", Path.home() / ".cache" / "spate-bench"))
    venv = cache / "pathway-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"installing {PATHWAY} into {venv} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PATHWAY], check=True)
    return python


def pathway_peer(
    initial: pa.Table,
    auctions: pa.Table,
    step: Callable[[int], tuple[pa.Table, pa.Table, pa.Table]],
    final: Callable[[], set[tuple[Any, ...]]],
    *,
    marker_auction: int,
    steps: int,
    work: Path,
) -> dict[str, Any]:
    """Write the load and ``2 * steps`` steps (``step(k)``: new, retracted, added bids), run
    the peer, and check its final view against ``final()`` (the expected rows)."""
    python = pathway_python()
    d = work / "pathway"
    d.mkdir()
    pq.write_table(initial, d / "bids.parquet")
    pq.write_table(auctions, d / "auctions.parquet")
    for k in range(1, 2 * steps + 1):
        new, old, repl = step(k)
        pq.write_table(new, d / f"new-{k}.parquet")
        pq.write_table(old, d / f"old-{k}.parquet")
        pq.write_table(repl, d / f"repl-{k}.parquet")
    out = subprocess.run(
        [str(python), str(PEER), str(d), str(steps), str(marker_auction)],
        capture_output=True,
        text=True,
        check=False,
        timeout=PEER_TIMEOUT_S,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the Pathway peer failed:\n{out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    figures = {
        "pathway_version": PATHWAY.split("==")[1],
        "pathway_load_s": round(got["load_s"], 2),
        "pathway_visible_p50_ms": round(got["visible_p50_ms"], 1),
        "pathway_visible_p99_ms": round(got["visible_p99_ms"], 1),
        "pathway_sustained_updates_per_s": round(got["sustained_updates_per_s"]),
        "pathway_final_view_equals_duckdb": {tuple(r) for r in got["final"]} == final(),
    }
    print(
        f"pathway {figures['pathway_version']}: load {figures['pathway_load_s']} s; write -> "
        f"visible p50 {figures['pathway_visible_p50_ms']} ms p99 "
        f"{figures['pathway_visible_p99_ms']} ms; sustained "
        f"{figures['pathway_sustained_updates_per_s']:,} updates/s; final view "
        f"{'equals' if figures['pathway_final_view_equals_duckdb'] else 'DIFFERS FROM'} DuckDB",
        flush=True,
    )
    return figures
