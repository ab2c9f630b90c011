"""Spark's own answer: the test pipeline's files recomputed in full by classic PySpark.

The same Python files run with a registry that, like ``spark-pipelines``, calls each query
function (here against the test's local SparkSession) and registers each result as a temporary
view under its dataset name, in dependency order; SQL files' queries run with ``spark.sql``.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.pipelines.graph_element_registry import (
    GraphElementRegistry,
    graph_element_registration_context,
)

from spate.pipelines.sql_files import _CREATE, split_statements

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class _Recompute(GraphElementRegistry):
    def __init__(self) -> None:
        self.flows: dict[str, Any] = {}

    def register_output(self, output: Any) -> None:
        pass

    def register_flow(self, flow: Any) -> None:
        self.flows[flow.target] = flow.func

    def register_sql(self, sql_text: str, file_path: Path) -> None:
        for _, stmt in split_statements(sql_text):
            m = _CREATE.match(stmt)
            assert m is not None
            query = m.group("query")
            self.flows[m.group("name")] = lambda spark, q=query: spark.sql(q)


def recompute(
    spark: SparkSession, spec: Path, datasets: tuple[str, ...]
) -> dict[str, list[dict[str, Any]]]:
    """Every dataset of the pipeline at ``spec``, recomputed from its inputs."""
    import yaml

    conf = yaml.safe_load(spec.read_text())["configuration"]
    for k, v in conf.items():
        spark.conf.set(k, v)
        # A session caches the file listings of the paths it read: list them again.
        spark.catalog.refreshByPath(v)
    registry = _Recompute()
    prev = os.getcwd()
    os.chdir(spec.parent)
    try:
        with graph_element_registration_context(registry):
            for f in sorted((spec.parent / "transformations").iterdir()):
                if f.suffix == ".py":
                    s = importlib.util.spec_from_file_location(f"oracle_{f.stem}", f)
                    assert s is not None and s.loader is not None
                    s.loader.exec_module(importlib.util.module_from_spec(s))
                elif f.suffix == ".sql":
                    registry.register_sql(f.read_text(), f)
    finally:
        os.chdir(prev)
    out: dict[str, list[dict[str, Any]]] = {}
    pending = dict(registry.flows)
    for name in pending:  # a view of an earlier recompute must not stand in for this one's
        spark.catalog.dropTempView(name)
    for _ in range(len(pending) + 1):
        for name, func in list(pending.items()):
            try:
                df = func(spark) if func.__name__ == "<lambda>" else func()
                df.createOrReplaceTempView(name)
            except Exception as e:  # reads a view not made yet
                if "TABLE_OR_VIEW_NOT_FOUND" not in str(e):
                    raise
                continue
            del pending[name]
    assert not pending, f"datasets that read what is not defined: {sorted(pending)}"
    for name in datasets:
        out[name] = [r.asDict() for r in spark.table(name).collect()]
    return out
