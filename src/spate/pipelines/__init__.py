"""Spark Declarative Pipelines, maintained by spate.

The same pipeline files ``spark-pipelines run`` reads (``pipeline.yml``, Python files with the
``pyspark.pipelines`` decorators, SQL files), their datasets kept up to date incrementally:
:func:`load_pipeline` loads and translates them (nothing is created; errors name the dataset
and the line), :class:`PipelineRunner` creates them in an environment and brings them up to
date. See docs/pipelines.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from spate.pipelines.compiler import CompiledDataset, CompiledPipeline, compile_pipeline
from spate.pipelines.errors import DefinitionError, NotMaintainable, PipelineError, SpecError
from spate.pipelines.loader import load_graph
from spate.pipelines.runner import PipelineRunner, RunResult, keep_up_to_date
from spate.pipelines.spec import PipelineSpec, load_spec

__all__ = [
    "CompiledDataset",
    "CompiledPipeline",
    "DefinitionError",
    "NotMaintainable",
    "PipelineError",
    "PipelineRunner",
    "PipelineSpec",
    "RunResult",
    "SpecError",
    "compile_pipeline",
    "keep_up_to_date",
    "load_graph",
    "load_pipeline",
    "load_spec",
]


def load_pipeline(
    path: Path,
    *,
    cache: Path | None = None,
    reload: bool = False,
    existing: Mapping[str, list[str]] | None = None,
) -> CompiledPipeline:
    """The pipeline at ``path`` (a spec file or its directory), loaded and translated;
    ``cache``: a directory where the loaded definitions are kept while their files are
    unchanged (:func:`spate.pipelines.loader.load_graph`), and the pipeline compiled from them
    while its inputs' first files are unchanged too (:mod:`spate.pipelines.compiled_cache`).
    ``existing``: the columns of the tables, sources and views of spate that
    ``spark.read.table`` may read besides the pipeline's own datasets (those of the data
    directory: :func:`spate.pipelines.runner.relation_columns`)."""
    spec = load_spec(path)
    if cache is None:
        graph = load_graph(spec)
        return compile_pipeline(spec, graph, existing=_foreign(existing, graph.datasets))
    from spate.pipelines.compiled_cache import compiled_key, load_compiled, store_compiled
    from spate.pipelines.loader import definitions_digest

    digest = definitions_digest(spec)
    graph = load_graph(spec, cache=cache, reload=reload, digest=digest)
    foreign = _foreign(existing, graph.datasets)
    key = compiled_key(digest + json.dumps(sorted(foreign.items())))
    kept = None if reload else load_compiled(spec, graph, key, cache)
    if kept is not None:
        return kept
    compiled = compile_pipeline(spec, graph, existing=foreign)
    store_compiled(compiled, key, cache)
    return compiled


def _foreign(
    existing: Mapping[str, list[str]] | None, datasets: Mapping[str, object]
) -> dict[str, list[str]]:
    """``existing`` less the pipeline's own datasets (a dataset a run created is the
    pipeline's, whatever the data directory holds of it)."""
    own = {d.lower() for d in datasets}
    return {n: list(c) for n, c in (existing or {}).items() if n.lower() not in own}
