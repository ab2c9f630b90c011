"""``spate pipeline run`` against Spark on the same pipeline files and the same inputs.

The test pipeline (``tests/pipelines/example``, 6 datasets: bronze from two Parquet
directories, silver a filter and a join in SQL, gold a group-by, a window and a top-k in
Python) is run by the ``spate pipeline run`` command after the first files and after each round
of changes (a new file, a replaced file, new customers). After every run, each dataset spate
wrote as Parquet under the pipeline's storage must equal Spark's answer on the same files:

* ``test_run_equals_spark_recompute``: the same files recomputed in full by classic PySpark
  (:mod:`tests.pipelines._spark_oracle`), ``SPATE_PIPELINE_ROUNDS`` rounds (default 1);
* ``test_run_equals_spark_pipelines`` (slow): the real ``spark-pipelines run`` of the same spec,
  its tables read from its warehouse, ``SPATE_PIPELINE_SPARK_ROUNDS`` rounds (default 2: the
  first round adds and replaces an orders file, the second adds customers too, so every kind
  of change is compared; each more round repeats them, at 20-60 s per ``spark-pipelines run``).

Both are slow: each ``spate pipeline run`` is a process that opens the environment, and its
replica hydrates the datasets' dataflows before the run's outputs are read.

The seed is printed; ``SPATE_PIPELINE_SEED`` replays one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from tests.pipelines._example import STORED, Inputs, normalized, pipeline_seed, write_pipeline
from tests.pipelines._spark_oracle import recompute

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROUNDS = int(os.environ.get("SPATE_PIPELINE_ROUNDS", "1"))
VENV_BIN = Path(sys.executable).parent


def _seed() -> int:
    return pipeline_seed(20261206)


def spate_run(spec: Path, data: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "spate", "pipeline", "run", str(spec), "--data-dir", str(data),
         "--keep-replicas"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def spate_outputs(storage: Path) -> dict[str, list[dict[str, Any]]]:
    return {n: pq.read_table(storage / "tables" / n).to_pylist() for n in STORED}


def stop_replicas(data: Path) -> None:
    from spate.orchestrator.process import stop_services

    stop_services(data)  # the replica the runs kept, as `spate stop` stops it


def _compare(spate: dict[str, Any], spark: dict[str, Any], when: str) -> None:
    for name in STORED:
        got, want = normalized(spate[name]), normalized(spark[name])
        assert got == want, f"{when}: dataset {name} differs\nspate: {got}\nspark: {want}"


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_run_equals_spark_recompute(tmp_path: Path, spark: SparkSession) -> None:
    root = tmp_path / "p"
    root.mkdir()
    spec = write_pipeline(root)
    inputs = Inputs(root, _seed())
    data = tmp_path / "spate"
    inputs.first()
    try:
        for i in range(ROUNDS + 1):
            if i:
                inputs.round(i)
            out = spate_run(spec, data)
            print(out)
            if i == 0:
                assert "created: bronze_orders" in out or "bronze_orders" in out
            else:
                assert "created: -" in out  # nothing recreated: only the changes are processed
            _compare(spate_outputs(root / "storage"), recompute(spark, spec, STORED), f"run {i}")
    finally:
        stop_replicas(data)


def spark_pipelines_run(root: Path) -> None:
    # Without a metastore each run starts with an empty catalog, and Spark refuses a managed
    # table over an existing location; its materialized views are recomputed in full anyway.
    shutil.rmtree(root / "spark-warehouse", ignore_errors=True)
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(VENV_BIN / "spark-pipelines"), "run", "--spec", "pipeline.yml"],
        cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def spark_pipelines_outputs(root: Path) -> dict[str, list[dict[str, Any]]]:
    warehouse = root / "spark-warehouse"
    return {n: pq.read_table(warehouse / n).to_pylist() for n in STORED}


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_run_equals_spark_pipelines(tmp_path: Path) -> None:
    spate_root, spark_root = tmp_path / "spate-p", tmp_path / "spark-p"
    spate_root.mkdir()
    spark_root.mkdir()
    spec = write_pipeline(spate_root)
    write_pipeline(spark_root)
    seed = _seed()
    inputs = Inputs(spate_root, seed)
    data = tmp_path / "spate"
    inputs.first()
    try:
        for i in range(int(os.environ.get("SPATE_PIPELINE_SPARK_ROUNDS", "2")) + 1):
            if i:
                inputs.round(i)
            for d in ("orders", "customers"):  # the same files for both
                shutil.rmtree(spark_root / d)
                shutil.copytree(spate_root / d, spark_root / d)
            spate_run(spec, data)
            spark_pipelines_run(spark_root)
            _compare(spate_outputs(spate_root / "storage"), spark_pipelines_outputs(spark_root),
                     f"run {i}")  # fmt: skip
    finally:
        stop_replicas(data)
