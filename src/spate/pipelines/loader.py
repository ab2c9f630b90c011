"""Load a pipeline's definitions into a :class:`~spate.pipelines.graph.Graph`.

The user's Python files run in a process of their own (:mod:`spate.pipelines._loader_main`):
pyspark's Spark Connect mode, which the decorators' DataFrames need, is process-wide, and
spate's own Spark code in this process runs classic PySpark. The child writes the graph as
JSON (plans as Spark Connect protobuf bytes); nothing is unpickled.

With a ``cache`` directory (``spate pipeline run`` passes its data directory), the graph is
kept there with a digest of what it was loaded from — the spec file, every definition file
(path and contents), the pyspark and spate versions — and reused while that digest holds: a run
of unchanged files starts no loader process. A change to any of those files loads them again;
code the definition files import from elsewhere is not in the digest (``reload=True``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from spate.pipelines.errors import DefinitionError
from spate.pipelines.graph import Graph
from spate.pipelines.spec import PipelineSpec

__all__ = ["definitions_digest", "load_graph"]

GRAPH_CACHE = "spate-pipeline-graph.json"


def definitions_digest(spec: PipelineSpec) -> str:
    """A digest of everything the loaded graph is a function of (module docs)."""
    from spate._version import __version__

    h = hashlib.sha256()
    h.update(_pyspark_version() + b"\0")
    for part in (__version__, str(spec.path.resolve())):
        h.update(part.encode() + b"\0")
    h.update(spec.path.read_bytes() + b"\0")
    for f in spec.files():
        h.update(str(f).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _pyspark_version() -> bytes:
    """pyspark's ``version.py`` (its ``__version__``), read without importing pyspark: a run
    of unchanged files then never imports it (half a second)."""
    found = importlib.util.find_spec("pyspark")
    locations = None if found is None else found.submodule_search_locations
    if not locations:
        return b"no pyspark"
    return (Path(next(iter(locations))) / "version.py").read_bytes()


def load_graph(
    spec: PipelineSpec,
    *,
    timeout: float = 300.0,
    cache: Path | None = None,
    reload: bool = False,
    digest: str | None = None,
) -> Graph:
    """The validated graph ``spec``'s files define; :class:`DefinitionError` names the file and
    line of a definition that fails. ``cache``: a directory to keep it in (module docs);
    ``digest``: :func:`definitions_digest` of ``spec`` if the caller has it."""
    if cache is None:
        digest = ""
    elif digest is None:
        digest = definitions_digest(spec)
    kept = cache / GRAPH_CACHE if cache is not None else None
    if kept is not None and kept.exists() and not reload:
        doc = json.loads(kept.read_text())
        if doc.get("digest") == digest:
            graph = Graph.from_json(doc["graph"])
            graph.validate()
            return graph
    raw = _load(spec, timeout)
    graph = Graph.from_json(raw)
    graph.validate()
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f".{kept.name}.tmp")
        tmp.write_text(json.dumps({"digest": digest, "graph": raw}))
        os.replace(tmp, kept)
    return graph


def _load(spec: PipelineSpec, timeout: float) -> Any:
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
    return result["graph"]
