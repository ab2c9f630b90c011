"""A compiled pipeline kept in the data directory, reused while what it was compiled from holds.

Compiling (:func:`~spate.pipelines.compiler.compile_pipeline`) parses every flow's Spark
Connect plan (pyspark's protobuf classes, a second of CPU to import) and SQL (sqlglot's Spark
dialect), and reads the first file of every input for its schema. Its result is a function of:
the definition files and the spec (the loaded graph's digest,
:func:`~spate.pipelines.loader.definitions_digest`), the translating code (the sources of this
package, the sqlglot version) and the first data file of each input directory (its name and
version). The cache (``spate-pipeline-compiled.json``) records all of them; a later run whose
record still holds (a listing of each input directory) takes the compiled datasets from it,
and any difference compiles again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any, Final

from spate.pipelines.compiler import CompiledDataset, CompiledPipeline
from spate.pipelines.expectations import Expectation
from spate.pipelines.graph import DatasetKind, Graph, Location
from spate.pipelines.inputs import FileInput
from spate.pipelines.spec import PipelineSpec

__all__ = ["COMPILED_CACHE", "compiled_key", "load_compiled", "store_compiled"]

COMPILED_CACHE: Final = "spate-pipeline-compiled.json"


def compiled_key(definitions: str) -> str:
    """The digest a compiled pipeline is kept under: the definitions' digest, the sources of
    the translating code and the sqlglot version."""
    h = hashlib.sha256(definitions.encode() + b"\0")
    for src in sorted(Path(__file__).parent.glob("*.py")):
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    try:
        h.update(importlib.metadata.version("sqlglot").encode())
    except importlib.metadata.PackageNotFoundError:
        h.update(b"no sqlglot")
    return h.hexdigest()


def _first_file(inp: FileInput) -> tuple[str, str] | None:
    """The name and version of ``inp``'s first data file now."""
    try:
        files = inp.files()
    except OSError:
        return None
    first = next(iter(files), None)
    return None if first is None else (first, files[first])


def load_compiled(
    spec: PipelineSpec, graph: Graph, key: str, cache: Path
) -> CompiledPipeline | None:
    """The compiled pipeline kept in ``cache`` under ``key``, if its inputs' first files are
    still those it was compiled from; else None."""
    path = cache / COMPILED_CACHE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if doc.get("key") != key:
        return None
    out = CompiledPipeline(spec, graph)
    for i in doc["inputs"]:
        inp = FileInput(
            table=i["table"],
            format=i["format"],
            directory=i["directory"],
            options=dict(i["options"]),
            schema=i["schema"],
            columns=tuple((str(n), str(t)) for n, t in i["columns"]),
            first=None if i["first"] is None else (str(i["first"][0]), str(i["first"][1])),
        )
        if inp.first is None or _first_file(inp) != inp.first:
            return None  # compiling read another file's schema: compile again
        out.inputs[inp.table] = inp
    for d in doc["datasets"]:
        out.datasets.append(
            CompiledDataset(
                name=d["name"],
                kind=DatasetKind[d["kind"]],
                location=Location(d["file"], d["line"]),
                sql=d["sql"],
                columns=list(d["columns"]),
                reads=frozenset(d["reads"]),
                expectations=tuple(Expectation.from_json(e) for e in d.get("expectations") or []),
                counts_sql=d.get("counts_sql"),
            )
        )
    return out


def store_compiled(pipeline: CompiledPipeline, key: str, cache: Path) -> None:
    """Keep ``pipeline`` in ``cache`` under ``key`` (written aside, renamed into place)."""
    doc: dict[str, Any] = {
        "key": key,
        "inputs": [
            {
                "table": i.table,
                "format": i.format,
                "directory": i.directory,
                "options": i.options,
                "schema": i.schema,
                "columns": [list(c) for c in i.columns],
                "first": None if i.first is None else list(i.first),
            }
            for i in pipeline.inputs.values()
        ],
        "datasets": [
            {
                "name": d.name,
                "kind": d.kind.name,
                "file": d.location.file,
                "line": d.location.line,
                "sql": d.sql,
                "columns": d.columns,
                "reads": sorted(d.reads),
                "expectations": [e.to_json() for e in d.expectations],
                "counts_sql": d.counts_sql,
            }
            for d in pipeline.datasets
        ],
    }
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / COMPILED_CACHE
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)
