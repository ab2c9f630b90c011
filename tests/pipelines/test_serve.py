"""``spate pipeline serve`` under a stream of new files: SUBSCRIBE to each gold dataset over
pgwire, and every committed time each reports must hold exactly Spark's full recompute of the
input files present then (files arrive in name order and each is written at once, so the
inputs at any time are a prefix of the files; each state must equal the recompute of one
prefix, and the last the recompute of all)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from tests.pipelines._example import GOLD, Inputs, normalized, pipeline_seed, write_pipeline
from tests.pipelines._processes import started_serve
from tests.pipelines._spark_oracle import recompute

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NEW_FILES = int(os.environ.get("SPATE_PIPELINE_SERVE_FILES", "3"))
QUIET_S = 30.0


COLUMNS = {
    "gold_regions": ("region", "revenue", "orders", "max_qty"),
    "gold_region_best": ("region", "rank", "order_id", "amount"),
    "gold_top_customers": ("customer_id", "spent"),
}


def _state(name: str, changes: Counter[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    rows = []
    for row, n in changes.items():
        rows += [dict(zip(COLUMNS[name], row, strict=True))] * n
    return normalized(rows)


def _row(row: list[Any]) -> tuple[Any, ...]:
    return tuple(int(v) if isinstance(v, Decimal) else v for v in row)


def _watch(dsn: str, name: str, stop: threading.Event, states: list[list[Any]]) -> None:
    """SUBSCRIBE to ``name`` until ``stop``: the state at each committed time it reports."""
    changes: Counter[tuple[Any, ...]] = Counter()
    pending_ts = None
    with psycopg.connect(dsn) as c:
        c.execute(f"DECLARE s CURSOR FOR SUBSCRIBE {name}")
        while not stop.is_set():
            rows = c.execute("FETCH ALL s WITH (timeout = '1s')").fetchall()
            for ts, diff, *row in rows:
                if pending_ts is not None and ts != pending_ts:
                    states.append(_state(name, +changes))
                pending_ts = ts
                changes[_row(row)] += diff
            if pending_ts is not None and not rows:
                states.append(_state(name, +changes))
                pending_ts = None
        c.rollback()


def _oracle_for_prefixes(spark: SparkSession, root: Path, tmp: Path) -> dict[str, list[Any]]:
    files = sorted(p.name for p in (root / "orders").iterdir() if not p.name.startswith("."))
    out: dict[str, list[Any]] = {name: [] for name in GOLD}
    for k in range(1, len(files) + 1):
        copy = tmp / f"prefix{k}"
        spec = write_pipeline(copy)
        shutil.rmtree(copy / "customers")
        shutil.copytree(root / "customers", copy / "customers")
        for f in files[:k]:
            shutil.copy(root / "orders" / f, copy / "orders" / f)
        for name, rows in recompute(spark, spec, GOLD).items():
            out[name].append(normalized(rows))
    return out


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_serve_subscribe_equals_spark_at_every_time(tmp_path: Path, spark: SparkSession) -> None:
    root = tmp_path / "p"
    root.mkdir()
    spec = write_pipeline(root)
    inputs = Inputs(root, pipeline_seed(20261207))
    inputs.first()
    data = tmp_path / "spate"
    proc, dsn = started_serve(spec, data, "--interval", "0.5")
    stop = threading.Event()
    others: dict[str, list[Any]] = {name: [] for name in GOLD if name != "gold_regions"}
    watchers = [
        threading.Thread(target=_watch, args=(dsn, name, stop, seen), daemon=True)
        for name, seen in others.items()
    ]
    try:
        for w in watchers:
            w.start()
        changes: Counter[tuple[Any, ...]] = Counter()
        states: list[list[Any]] = []
        with psycopg.connect(dsn) as c:
            c.execute("DECLARE s CURSOR FOR SUBSCRIBE gold_regions")
            pending_ts = None
            written = 0
            idle_since = time.monotonic()
            deadline = idle_since + 600
            while time.monotonic() < deadline:
                rows = c.execute("FETCH ALL s WITH (timeout = '1s')").fetchall()
                for ts, diff, *row in rows:
                    if pending_ts is not None and ts != pending_ts:
                        states.append(_state("gold_regions", +changes))
                    pending_ts = ts
                    changes[_row(row)] += diff
                if rows:
                    idle_since = time.monotonic()
                if pending_ts is not None and not rows:
                    states.append(_state("gold_regions", +changes))
                    pending_ts = None
                    if written < NEW_FILES:
                        inputs.orders()
                        written += 1
                if written == NEW_FILES and time.monotonic() - idle_since > QUIET_S:
                    break  # every file written, and nothing more for a while
            c.rollback()
        stop.set()
        for w in watchers:
            w.join(60)
        oracles = _oracle_for_prefixes(spark, root, tmp_path / "oracle")
        for name, got in {"gold_regions": states, **others}.items():
            assert got, f"SUBSCRIBE {name} reported nothing"
            for i, s in enumerate(got):
                assert s in oracles[name], f"{name}: state {i} is no prefix's recompute: {s}"
            assert got[-1] == oracles[name][-1], f"{name}: the last state is not every file's"
        assert len({repr(s) for s in states}) > 1
    finally:
        stop.set()
        proc.terminate()
        proc.wait(60)
