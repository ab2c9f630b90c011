"""Load a pipeline's definitions into a :class:`~spate.pipelines.graph.Graph`.

The user's Python files run in a process of their own (:mod:`spate.pipelines._loader_main`):
pyspark's Spark Connect mode, which the decorators' DataFrames need, is process-wide, and
spate's own Spark code in this process runs classic PySpark. The child writes the graph as
JSON (plans as Spark Connect protobuf bytes); nothing is unpickled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from spate.pipelines.errors import DefinitionError
from spate.pipelines.graph import Graph
from spate.pipelines.spec import PipelineSpec

__all__ = ["load_graph"]


def load_graph(spec: PipelineSpec, *, timeout: float = 300.0) -> Graph:
    """The validated graph ``spec``'s files define; :class:`DefinitionError` names the file and
    line of a definition that fails."""
    with tempfile.TemporaryDirectory(prefix="spate-pipeline-") as tmp:
        out = Path(tmp) / "graph.json"
        env = dict(os.environ)
        env.pop("SPARK_REMOTE", None)
        proc = subprocess.run(  # noqa: S603 (our own module, with the spec path)
            [sys.executable, "-m", "spate.pipelines._loader_main", str(spec.path), str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if not out.exists():
            raise DefinitionError(
                f"loading the definitions of pipeline {spec.name!r} failed "
                f"(exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
            )
        result = json.loads(out.read_text())
    if "error" in result:
        raise DefinitionError(f"pipeline {spec.name!r}: {result['error']}")
    graph = Graph.from_json(result["graph"])
    graph.validate()
    return graph
