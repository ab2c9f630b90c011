"""The Flink peer of ``bench/e2e.py`` computes the same max as DuckDB when a bid's deletion is
read before its insertion (its file source reads files with two readers, in no order between
files). Runs in PyFlink's own virtual environment; skipped, saying why, when it is missing
(``bench/_flink.py`` creates it on the first ``bench/e2e.py --with flink``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from bench._flink import PEER, _changelog, flink_venv_python

MARKER = -1


def bids(*rows: tuple[int, int, int, int]) -> pa.Table:
    names = ("id", "auction", "bidder", "price")
    return pa.table({n: pa.array([r[i] for r in rows], pa.int64()) for i, n in enumerate(names)})


def test_a_deletion_read_before_its_insertion_gives_the_right_max(tmp_path: Path) -> None:
    python = flink_venv_python()
    if not python.exists() or shutil.which("java") is None:
        pytest.skip(f"no PyFlink environment at {python} or no java on the PATH")
    for d in ("bids", "auctions", "steps"):
        (tmp_path / d).mkdir()
    auctions = pa.table({"id": [1, MARKER], "seller": [10, 11], "category": ["c1", "c2"]})
    _changelog(tmp_path / "auctions" / "auctions.json", [], [auctions])
    marker = (0, MARKER, 0, 10**12)
    _changelog(tmp_path / "bids" / "bids.json", [], [bids(marker, (1, 1, 0, 50))])
    # Step 1 deletes bid 3 (price 500) before step 2 inserts it, as two readers may deliver a
    # step that inserts a bid and a later one that deletes it.
    moved = (0, MARKER, 0, 10**12 + 1)
    _changelog(
        tmp_path / "steps" / "step-00001.json", [bids(marker, (3, 1, 0, 500))], [bids(moved)]
    )
    last = (0, MARKER, 0, 10**12 + 2)
    _changelog(
        tmp_path / "steps" / "step-00002.json",
        [bids(moved)],
        [bids((3, 1, 0, 500), (2, 1, 0, 100), last)],
    )
    out = subprocess.run(
        [str(python), str(PEER), str(tmp_path), "1", str(MARKER), "2", "0 ms"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(map(tuple, result["final"])) == [
        (MARKER, 10**12 + 2, 11, "c2"),
        (1, 100, 10, "c1"),
    ]
