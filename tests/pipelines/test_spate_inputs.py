"""A pipeline reading spate's own objects: ``spark.read.table`` (and a SQL file's ``FROM``) of
a table of the pipeline's data directory that is not a dataset, maintained as any input is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipelines._example import output_rows, small_pipeline
from tests.pipelines.test_run_vs_spark import spate_run, stop_replicas

_PY = """\
from pyspark import pipelines as dp
from pyspark.sql import SparkSession
spark = SparkSession.active()

@dp.materialized_view
def by_region():
    return spark.read.table("accounts").groupBy("region").count()
"""

_SQL = """\
CREATE MATERIALIZED VIEW big_accounts AS SELECT id, region FROM accounts WHERE balance > 10;
"""


def _insert(data: Path, rows: str) -> None:
    from spate.environment.api import Environment

    env = Environment.open(data)
    try:
        env.sql("CREATE TABLE IF NOT EXISTS accounts (id bigint, region text, balance bigint)")
        env.sql(f"INSERT INTO accounts VALUES {rows}")
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_spate_table_is_an_input(tmp_path: Path) -> None:
    root = tmp_path / "p"
    spec = small_pipeline(root, "p", {"a.py": _PY, "b.sql": _SQL})
    data = tmp_path / "spate"
    _insert(data, "(1, 'n', 5), (2, 'n', 50), (3, 's', 20)")
    try:
        spate_run(spec, data)
        assert output_rows(root, "by_region") == [("n", 2), ("s", 1)]
        assert output_rows(root, "big_accounts") == [(2, "n"), (3, "s")]
        _insert(data, "(4, 's', 99)")
        out = spate_run(spec, data)
        assert "created: -" in out  # the datasets were kept, and followed the table
        assert output_rows(root, "by_region") == [("n", 2), ("s", 2)]
        assert output_rows(root, "big_accounts") == [(2, "n"), (3, "s"), (4, "s")]
    finally:
        stop_replicas(data)
