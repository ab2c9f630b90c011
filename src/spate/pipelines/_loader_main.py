"""The loader process: ``python -m spate.pipelines._loader_main SPEC OUT``.

Imports the pipeline's Python files and registers its SQL files as ``spark-pipelines`` does,
with the real ``pyspark.pipelines`` decorators bound to
:class:`~spate.pipelines.registry.SpateGraphElementRegistry`, and writes the graph as JSON to
``OUT`` (``{"graph": …}`` or ``{"error": message}``). pyspark runs here in Spark Connect mode
against a session that never connects (a process of its own, since the mode is process-wide):
``spark.sql(query)`` becomes a plan of the query, ``spark.conf.get(key)`` reads the spec's
``configuration``; any other call that asks a server fails the definition.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any


def _session(configuration: dict[str, str]) -> Any:
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    import pyspark.errors.utils as error_utils

    # Expressions carry their Python call site (file:line), as with a server that enables
    # DataFrame debugging (the default); reading that setting would ask the server.
    setattr(error_utils, "_enable_debugging_cache", True)  # noqa: B010 (a private cache)
    from pyspark.sql.connect.conf import RuntimeConf
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.plan import SQL
    from pyspark.sql.connect.session import SparkSession

    missing = object()

    def conf_get(self: Any, key: str, default: Any = missing) -> Any:
        if key in configuration:
            return configuration[key]
        if default is missing:
            raise KeyError(f"{key} is not set in the pipeline spec's configuration")
        return default

    def sql(self: Any, query: str, args: Any = None, **kwargs: Any) -> Any:
        if args or kwargs:
            raise ValueError("spark.sql with parameters is not supported in a pipeline by spate")
        return DataFrame(SQL(query), self)

    RuntimeConf.get = conf_get  # type: ignore[method-assign]
    SparkSession.sql = sql  # type: ignore[method-assign, assignment]
    spark = SparkSession.builder.remote("sc://127.0.0.1:1").getOrCreate()
    spark.client._retry_policies = []  # a call that reaches for the server fails at once
    return spark


def load(spec_path: Path) -> dict[str, Any]:
    from pyspark.pipelines.graph_element_registry import graph_element_registration_context

    from spate.pipelines import _expect_api
    from spate.pipelines._call_sites import record_call_sites
    from spate.pipelines.graph import Graph
    from spate.pipelines.registry import SpateGraphElementRegistry
    from spate.pipelines.spec import load_spec

    spec = load_spec(spec_path)
    spark = _session(dict(spec.configuration))
    graph = Graph()
    registry = SpateGraphElementRegistry(graph, spark.client, sites=record_call_sites())
    _expect_api.install()
    os.chdir(spec.root)
    with graph_element_registration_context(registry):
        for file in spec.files():
            if file.suffix == ".py":
                module_spec = importlib.util.spec_from_file_location(file.stem, str(file))
                assert module_spec is not None and module_spec.loader is not None
                module = importlib.util.module_from_spec(module_spec)
                module_spec.loader.exec_module(module)
            else:
                registry.register_sql(file.read_text(), file.relative_to(spec.root))
    return graph.to_json()


def main() -> None:
    spec_path, out = Path(sys.argv[1]), Path(sys.argv[2])
    try:
        result: dict[str, Any] = {"graph": load(spec_path)}
    except Exception as e:
        from spate.pipelines.errors import PipelineError

        if isinstance(e, PipelineError):
            result = {"error": str(e), "kind": type(e).__name__}
        else:
            import traceback

            frames = traceback.extract_tb(e.__traceback__)
            user = [f for f in frames if "site-packages" not in f.filename]
            where = f" at {user[-1].filename}:{user[-1].lineno}" if user else ""
            result = {"error": f"{type(e).__name__}: {e}{where}", "kind": "DefinitionError"}
    out.write_text(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # the offline Connect client's threads must not hold the exit


if __name__ == "__main__":
    main()
