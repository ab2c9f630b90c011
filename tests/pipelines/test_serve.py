"""``spate pipeline serve`` under a stream of new files: SUBSCRIBE to a gold dataset over
pgwire, and every committed time it reports must hold exactly Spark's full recompute of the
input files present then (files arrive in name order and each is written at once, so the
inputs at any time are a prefix of the files; each state must equal the recompute of one
prefix, and the last the recompute of all)."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from tests.pipelines._example import Inputs, normalized, pipeline_seed, write_pipeline
from tests.pipelines._processes import started_serve
from tests.pipelines._spark_oracle import recompute

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NEW_FILES = int(os.environ.get("SPATE_PIPELINE_SERVE_FILES", "3"))
QUIET_S = 30.0


def _state(changes: Counter[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    cols = ("region", "revenue", "orders", "max_qty")
    rows = []
    for row, n in changes.items():
        rows += [dict(zip(cols, row, strict=True))] * n
    return normalized(rows)


def _oracle_for_prefixes(spark: SparkSession, root: Path, tmp: Path) -> list[list[Any]]:
    files = sorted(p.name for p in (root / "orders").iterdir() if not p.name.startswith("."))
    out = []
    for k in range(1, len(files) + 1):
        copy = tmp / f"prefix{k}"
        spec = write_pipeline(copy)
        shutil.rmtree(copy / "customers")
        shutil.copytree(root / "customers", copy / "customers")
        for f in files[:k]:
            shutil.copy(root / "orders" / f, copy / "orders" / f)
        out.append(normalized(recompute(spark, spec, ("gold_regions",))["gold_regions"]))
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
    try:
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
                        states.append(_state(+changes))
                    pending_ts = ts
                    row = [int(v) if isinstance(v, Decimal) else v for v in row]
                    changes[tuple(row)] += diff
                if rows:
                    idle_since = time.monotonic()
                if pending_ts is not None and not rows:
                    states.append(_state(+changes))
                    pending_ts = None
                    if written < NEW_FILES:
                        inputs.orders()
                        written += 1
                if written == NEW_FILES and time.monotonic() - idle_since > QUIET_S:
                    break  # every file written, and nothing more for a while
            c.rollback()
        oracles = _oracle_for_prefixes(spark, root, tmp_path / "oracle")
        assert states, "SUBSCRIBE reported nothing"
        for i, s in enumerate(states):
            assert s in oracles, f"state {i} is no prefix's recompute: {s}"
        assert states[-1] == oracles[-1], "the last state is not the recompute of every file"
        assert len({repr(s) for s in states}) > 1
    finally:
        proc.terminate()
        proc.wait(60)
