"""Expectations over a small Parquet input, followed across runs: ``expect`` keeps and counts,
``expect_or_drop`` drops what it counts failed, ``expect_or_fail`` fails the run naming the
expectation and a row. Counts and datasets are checked against a recompute over the files."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipelines._example import output_rows, small_pipeline
from tests.pipelines.test_run_vs_spark import spate_run, stop_replicas

_PY = """\
from pyspark import pipelines as dp
from pyspark.sql import SparkSession
spark = SparkSession.active()

@dp.expect("positive", "k > 0")
@dp.materialized_view
@dp.expect_or_drop("has_v", "v IS NOT NULL")
def base():
    return spark.read.parquet("data")

@dp.materialized_view
@dp.expect_or_fail("small", "k < 100")
def capped():
    return spark.read.table("base").select("k", "v")
"""


def _write(root: Path, name: str, rows: list[tuple[int | None, str | None]]) -> None:
    table = pa.table(
        {"k": pa.array([r[0] for r in rows], pa.int64()), "v": pa.array([r[1] for r in rows])}
    )
    pq.write_table(table, root / "data" / name)


def _rows(root: Path) -> list[dict[str, Any]]:
    return [r for f in sorted((root / "data").iterdir()) for r in pq.read_table(f).to_pylist()]


def _recount(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, int]]:
    """Each expectation's (passed, failed) over ``rows``: a row passes when the constraint is
    true (NULL fails); ``small`` sees what ``has_v`` leaves."""

    def count(rs: list[dict[str, Any]], ok: Any) -> tuple[int, int]:
        n = sum(1 for r in rs if ok(r) is True)
        return n, len(rs) - n

    kept = [r for r in rows if r["v"] is not None]
    return {
        ("base", "positive"): count(rows, lambda r: None if r["k"] is None else r["k"] > 0),
        ("base", "has_v"): count(rows, lambda r: r["v"] is not None),
        ("capped", "small"): count(kept, lambda r: None if r["k"] is None else r["k"] < 100),
    }


def _printed(out: str) -> dict[tuple[str, str], tuple[int, int]]:
    got = {}
    for line in out.splitlines():
        if line.strip().startswith("expectation "):
            name, _, rest = line.strip()[len("expectation ") :].partition(" (")
            ds, _, exp = name.partition(".")
            counts = rest.split(": ")[1].split(", ")
            got[(ds, exp)] = (int(counts[0].split()[0]), int(counts[1].split()[0]))
    return got


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_expect_drop_and_fail_across_runs(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    spec = small_pipeline(root, "checks", {"defs.py": _PY})
    data = tmp_path / "spate"
    _write(root, "a.parquet", [(1, "a"), (2, "b"), (3, None)])
    try:
        for run in range(2):  # the second run: a new file with violations
            if run == 1:
                _write(root, "b.parquet", [(-1, "c"), (None, None), (5, None), (7, "d")])
            out = spate_run(spec, data)
            rows = _rows(root)
            assert _printed(out) == _recount(rows), out
            kept = sorted(((r["k"], r["v"]) for r in rows if r["v"] is not None), key=repr)
            assert output_rows(root, "base") == kept  # drop: the rows passing has_v, and only them
            assert output_rows(root, "capped") == kept
        assert _printed(out)[("base", "positive")] == (5, 2)  # -1 and NULL (not true) fail

        # the counts are in spate_catalog.pipeline_expectations while a run holds the env
        from spate.environment.api import Environment
        from spate.pipelines import PipelineRunner, load_pipeline
        from spate.pipelines.runner import relation_columns

        env = Environment.open(data)
        try:
            pipeline = load_pipeline(spec, cache=data, existing=relation_columns(env))
            result = PipelineRunner(env, pipeline, data).run()
            want = {
                ("checks", ds, e, a, *_recount(_rows(root))[(ds, e)])
                for ds, e, a in [("base", "positive", "warn"), ("base", "has_v", "drop"),
                                 ("capped", "small", "fail")]
            }  # fmt: skip
            got_result = {(c.pipeline, c.dataset, c.expectation, c.action, c.passed, c.failed)
                          for c in result.expectations}  # fmt: skip
            assert got_result == want
            deadline = time.monotonic() + 60
            while True:
                rel = env.select("spate_catalog.pipeline_expectations", timeout=60)
                got = {tuple(r.values()) for r in rel.to_pylist()}
                if got == want or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert got == want
        finally:
            env.close()

        # a row over 100 reaching `capped` fails the run, naming the expectation and the row
        _write(root, "c.parquet", [(500, "big"), (9, "ok")])
        proc = subprocess.run(
            [sys.executable, "-m", "spate", "pipeline", "run", str(spec), "--data-dir",
             str(data), "--keep-replicas"],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert proc.returncode != 0
        err = proc.stderr
        assert "expectation 'small' of dataset 'capped' failed" in err, err[-3000:]
        assert "k=500" in err and "capped" in err, err[-3000:]

        # the offending file replaced: the dataset is out of error at the next run
        _write(root, "c.parquet", [(9, "ok")])
        out = spate_run(spec, data)
        assert _printed(out) == _recount(_rows(root)), out
        assert (9, "ok") in output_rows(root, "capped")
    finally:
        stop_replicas(data)
