"""Spark Declarative Pipelines, maintained by spate.

The same pipeline files ``spark-pipelines run`` reads (``pipeline.yml``, Python files with the
``pyspark.pipelines`` decorators, SQL files), their datasets kept up to date incrementally:
:func:`load_pipeline` loads and translates them (nothing is created; errors name the dataset
and the line), :class:`PipelineRunner` creates them in an environment and brings them up to
date. See docs/pipelines.md.
"""

from __future__ import annotations

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
    path: Path, *, cache: Path | None = None, reload: bool = False
) -> CompiledPipeline:
    """The pipeline at ``path`` (a spec file or its directory), loaded and translated;
    ``cache``: a directory where the loaded definitions are kept while their files are
    unchanged (:func:`spate.pipelines.loader.load_graph`), and the pipeline compiled from them
    while its inputs' first files are unchanged too (:mod:`spate.pipelines.compiled_cache`)."""
    spec = load_spec(path)
    if cache is None:
        return compile_pipeline(spec, load_graph(spec))
    from spate.pipelines.compiled_cache import compiled_key, load_compiled, store_compiled
    from spate.pipelines.loader import definitions_digest

    digest = definitions_digest(spec)
    graph = load_graph(spec, cache=cache, reload=reload, digest=digest)
    key = compiled_key(digest)
    kept = None if reload else load_compiled(spec, graph, key, cache)
    if kept is not None:
        return kept
    compiled = compile_pipeline(spec, graph)
    store_compiled(compiled, key, cache)
    return compiled
