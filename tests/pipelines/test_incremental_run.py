"""A run after the first does work proportional to what changed, and still equals Spark.

The test pipeline over a base of ``BASE_FILES`` order files; the first run creates everything
and leaves its replica running (as ``spate pipeline run`` does). Each later run is a new
environment (a new controller, as a new ``run`` process is) over the same data directory:

* it reads only the changed input files (a new file and a replaced one): the rows read are
  theirs, not the base's;
* the replica's dataflows are adopted as they are, not rebuilt: the input updates each
  dataflow reads during the run (``spate_catalog.dataflow_statistics.rows_in``) are at most
  twice the run's changed rows, and all six together fewer than the base's rows — which a
  rebuild reads into ``bronze_orders`` alone;
* the loaded definitions are reused (no loader process) while the files are unchanged;
* every dataset, as Spark reads spate's Parquet output (``spark.read.parquet``, and
  ``spark.read.table`` of a table created over its location), equals Spark's full recompute of
  the same files.

The seed is printed; ``SPATE_PIPELINE_SEED`` replays one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from spate.orchestrator.process import stop_services
from spate.pipelines import loader
from tests.pipelines._example import STORED, Inputs, normalized, pipeline_seed, write_pipeline
from tests.pipelines._spark_oracle import recompute

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spate.environment.api import Environment

BASE_FILES = 30
ROWS = 40
ROUNDS = 2


def _seed() -> int:
    return pipeline_seed(20261206)


def _open(data: Path) -> Environment:
    from spate.config import load_settings
    from spate.environment.api import Environment

    settings = load_settings()
    replicas = settings.replicas.model_copy(update={"grace_period_s": 900.0})
    return Environment.open(data, settings=settings.model_copy(update={"replicas": replicas}))


def _rows_in(env: Environment, *, timeout: float = 120.0) -> dict[str, int]:
    """Each dataflow's input updates so far, once the replica has reported every one."""
    deadline = time.monotonic() + timeout
    while True:
        t = env.sql("SELECT name, rows_in FROM spate_catalog.dataflow_statistics")
        assert isinstance(t, pa.Table)
        got = dict(zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True))
        if len(got) == len(STORED) and all(v is not None for v in got.values()):
            return {k: int(v) for k, v in got.items()}
        assert time.monotonic() < deadline, f"no statistics from the replica: {got}"
        time.sleep(0.5)


def _spark_outputs(spark: SparkSession, storage: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        n: [r.asDict() for r in spark.read.parquet(str(storage / "tables" / n)).collect()]
        for n in STORED
    }


def _compare(spark: SparkSession, root: Path, spec: Path, when: str) -> None:
    got = _spark_outputs(spark, root / "storage")
    want = recompute(spark, spec, STORED)
    for name in STORED:
        assert normalized(got[name]) == normalized(want[name]), f"{when}: {name} differs"
    # as a table of Spark's catalog over the output's location (docs/pipelines.md)
    location = root / "storage" / "tables" / "gold_regions"
    spark.sql(f"CREATE TABLE IF NOT EXISTS spate_out_gold USING parquet LOCATION '{location}'")
    spark.catalog.refreshTable("spate_out_gold")
    table = [r.asDict() for r in spark.read.table("spate_out_gold").collect()]
    assert normalized(table) == normalized(want["gold_regions"]), f"{when}: the table differs"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_run_reads_and_computes_only_the_change(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spate.pipelines import PipelineRunner, load_pipeline

    root = tmp_path / "p"
    root.mkdir()
    spec = write_pipeline(root)
    inputs = Inputs(root, _seed(), rows=ROWS)
    inputs.customers(10)
    for _ in range(BASE_FILES):
        inputs.orders()
    data = tmp_path / "spate"
    env = _open(data)
    try:
        first = PipelineRunner(env, load_pipeline(spec, cache=data), data).run()
        assert first.files_changed == BASE_FILES + 1
        assert first.rows_read == BASE_FILES * ROWS + 10
        env.close(stop_replicas=False)
        _compare(spark, root, spec, "run 0")

        def no_loader(*_: object) -> None:
            raise AssertionError("the definitions were loaded again though unchanged")

        monkeypatch.setattr(loader, "_load", no_loader)
        for i in range(1, ROUNDS + 1):
            inputs.round(i)  # a new file, a replaced one (and new customers in even rounds)
            env = _open(data)  # a new run: a new controller over the same data directory
            before = _rows_in(env)
            result = PipelineRunner(env, load_pipeline(spec, cache=data), data).run()
            customers = 3 if i % 2 == 0 else 0
            assert result.created == ()
            assert result.files_changed == 2 + (customers > 0)
            assert result.rows_read == 2 * ROWS + customers
            updates = 3 * ROWS + customers  # the new file, the replaced one's old and new rows
            deadline = time.monotonic() + 60
            while (after := _rows_in(env))["bronze_orders"] - before["bronze_orders"] < 3 * ROWS:
                assert time.monotonic() < deadline, f"bronze_orders read {after} since {before}"
                time.sleep(0.5)
            work = {k: after[k] - before[k] for k in after}
            print(f"run {i}: {result}; dataflow input updates {work}")
            # each dataflow reads a multiple of the change (how its steps batch it varies)
            assert all(n <= 2 * updates for n in work.values()), work
            assert sum(work.values()) < BASE_FILES * ROWS  # less than a rebuild of bronze alone
            env.close(stop_replicas=False)
            _compare(spark, root, spec, f"run {i}")
    finally:
        spark.sql("DROP TABLE IF EXISTS spate_out_gold")
        env.close(stop_replicas=False)  # (again, after a failure: a closed one stays closed)
        stop_services(data)  # the kept replica, as `spate stop` stops it
