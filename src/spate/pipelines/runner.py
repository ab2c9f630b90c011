"""Bring a compiled pipeline's datasets into a spate environment and keep them up to date.

:meth:`PipelineRunner.install` creates what is missing: a table per file input, and per dataset
a materialized view (materialized views and streaming tables) or a view (temporary views),
named as the dataset, from its Spark SQL query (``dialect="spark"``). A dataset whose query
changed since the last run is dropped and created again, with everything reading it. From then
on spate maintains every dataset incrementally: :meth:`sync` only writes the changes of the
input files (new, replaced, deleted) into the input tables, and the views follow: a run reads
only the files whose version differs from the one the inputs' frontier records
(:mod:`spate.pipelines.file_frontier`), and the replica that runs the datasets' dataflows, left
running between runs, is adopted by the next run with its dataflows as they are (no
recomputation).
:meth:`write_outputs` writes each stored dataset as Parquet at one committed time.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spate.errors import UsageError
from spate.pipelines.compiler import CompiledDataset, CompiledPipeline
from spate.pipelines.expectations import COUNTS_PREFIX, counts_view
from spate.pipelines.expressions import ident
from spate.pipelines.file_frontier import FileFrontier
from spate.pipelines.graph import DatasetKind
from spate.pipelines.inputs import INPUT_PREFIX, Synced, input_desc, sync_input
from spate.pipelines.outputs import write_output

if TYPE_CHECKING:
    from spate.environment.api import Environment

__all__ = [
    "ExpectationCounts",
    "PipelineRunner",
    "RunResult",
    "keep_up_to_date",
    "relation_columns",
]

_log = logging.getLogger(__name__)
_STATE = "spate-pipeline.json"

READ_WINDOW_MS: Final = 10 * 60 * 1000
"""How far back each dataset stays readable: every run reads all of them at one time."""


def relation_columns(env: Environment) -> dict[str, list[str]]:
    """The columns of every table, source and view of ``env`` but the pipelines' file
    inputs: what a dataset may read with ``spark.read.table`` besides the other datasets."""
    out: dict[str, list[str]] = {}
    for name in env.names():
        if name.startswith((INPUT_PREFIX, COUNTS_PREFIX)):
            continue
        try:
            desc = env.get(name).desc
        except UsageError:  # an index or a sink: not a relation to read
            continue
        out[name] = [c.name for c in desc.columns]
    return out


@dataclass(frozen=True, slots=True)
class RunResult:
    files_changed: int
    """Input files read (new or replaced) or retracted (deleted) by the run."""
    rows_read: int
    """Rows read from those files."""
    created: tuple[str, ...]
    timestamp: int
    """The committed time every dataset's Parquet output is as of."""
    seconds: tuple[tuple[str, float], ...] = ()
    """Where the run's time went: (phase, seconds) for install, inputs and outputs."""
    expectations: tuple[ExpectationCounts, ...] = ()
    """Every expectation's counts at ``timestamp``."""


@dataclass(frozen=True, slots=True)
class ExpectationCounts:
    """The rows of ``dataset``'s query passing and failing ``expectation`` at one time (a row
    of ``spate_catalog.pipeline_expectations``)."""

    pipeline: str
    dataset: str
    expectation: str
    action: str
    passed: int
    failed: int


class PipelineRunner:
    """Runs ``pipeline`` in ``env`` (whose data directory holds the pipeline's state)."""

    def __init__(self, env: Environment, pipeline: CompiledPipeline, data_dir: Path) -> None:
        self.env, self.pipeline, self.data_dir = env, pipeline, data_dir
        self.frontier = FileFrontier(data_dir)

    def _exists(self, name: str) -> bool:
        try:
            self.env.get(name)
        except Exception:
            return False
        return True

    def _state_path(self) -> Path:
        return self.data_dir / _STATE

    def _definitions(self) -> dict[str, str]:
        p = self._state_path()
        return dict(json.loads(p.read_text())) if p.exists() else {}

    def install(self) -> tuple[str, ...]:
        """Create the inputs and datasets that are missing or changed; the names created."""
        for inp in self.pipeline.inputs.values():
            if not self._exists(inp.table):
                self.env.create_table(inp.table, input_desc(inp))
                self.frontier.reset(inp.table, {})
        known = self._definitions()
        changed: set[str] = set()
        created: list[str] = []
        for d in self.pipeline.datasets:
            stale = known.get(d.name) != d.sql or bool(d.reads & changed)
            if not stale and self._exists(d.name):
                continue
            if self._exists(d.name):
                self.env.drop(d.name, cascade=True)
            self._create(d)
            changed.add(d.name)
            created.append(d.name)
            known[d.name] = d.sql
            self._state_path().write_text(json.dumps(known, indent=1))
        self._install_counts(known, changed)
        return tuple(created)

    def _install_counts(self, known: dict[str, str], changed: set[str]) -> None:
        """Create the expectation counts views that are missing or changed, and drop those of
        expectations no longer declared."""
        wanted = {counts_view(d.name): d for d in self.pipeline.datasets if d.counts_sql}
        for name in [n for n in known if n.startswith(COUNTS_PREFIX) and n not in wanted]:
            if self._exists(name):
                self.env.drop(name)
            del known[name]
        for name, d in wanted.items():
            assert d.counts_sql is not None
            exists = self._exists(name)
            if exists and known.get(name) == d.counts_sql and not d.reads & changed:
                continue
            if exists:
                self.env.drop(name, cascade=True)
            query = f"CREATE MATERIALIZED VIEW {ident(name)} AS {d.counts_sql}"
            self.env.sql(query, dialect="spark")
            self.env.set_retain_history(name, READ_WINDOW_MS)
            known[name] = d.counts_sql
        self._state_path().write_text(json.dumps(known, indent=1))

    def expectation_counts(self, timestamp: int) -> tuple[ExpectationCounts, ...]:
        """Every expectation's counts as of ``timestamp``, also made the pipeline's rows of
        ``spate_catalog.pipeline_expectations``."""
        spec = self.pipeline.spec.name
        out: list[ExpectationCounts] = []
        for d in self.pipeline.datasets:
            if not d.counts_sql:
                continue
            table = self.env.select(counts_view(d.name), as_of=timestamp, timeout=600)
            by_name = {r["expectation"]: r for r in table.to_pylist()}
            for e in d.expectations:
                r = by_name.get(e.name, {})
                out.append(
                    ExpectationCounts(spec, d.name, e.name, e.action.value,
                                      int(r.get("passed") or 0), int(r.get("failed") or 0))
                )  # fmt: skip
        self.env.runtime.pipeline_expectations[spec] = [
            (c.pipeline, c.dataset, c.expectation, c.action, c.passed, c.failed) for c in out
        ]
        return tuple(out)

    def _create(self, d: CompiledDataset) -> None:
        what = "VIEW" if d.kind is DatasetKind.TEMPORARY_VIEW else "MATERIALIZED VIEW"
        self.env.sql(f"CREATE {what} {ident(d.name)} AS {d.sql}", dialect="spark")
        if d.kind is not DatasetKind.TEMPORARY_VIEW:
            # every dataset is read at one time after each run (write_outputs): keep that time
            # readable while the datasets are read one after the other
            self.env.set_retain_history(d.name, READ_WINDOW_MS)

    def sync(self) -> Synced:
        """Write the input files' changes into the input tables: only the files whose version
        differs from the one the inputs' frontier records are read."""
        done = Synced()
        for inp in self.pipeline.inputs.values():
            done += sync_input(self.env, inp, self.frontier)
        return done

    def stored(self) -> list[CompiledDataset]:
        return [d for d in self.pipeline.datasets if d.kind is not DatasetKind.TEMPORARY_VIEW]

    def write_outputs(self, *, cancel: threading.Event | None = None) -> int:
        """Write every stored dataset as of one committed time (the oracle's read time: every
        write acknowledged before is in it); that time. The datasets are read and written
        concurrently: each read waits for its dataset's dataflow to reach that time. Setting
        ``cancel`` ends the reads waiting (:class:`~spate.errors.QueryCanceled`): a stopping
        ``serve`` does not wait for them, nor its exit for their threads."""
        storage = self.pipeline.spec.storage_dir()
        timestamp = self._readable_time()

        def write(d: CompiledDataset) -> None:
            table = self.env.select(d.name, as_of=timestamp, timeout=600, cancel=cancel)
            write_output(storage, d.name, table, timestamp=timestamp)

        stored = self.stored()
        with ThreadPoolExecutor(max(1, min(4, len(stored))), "pipeline-output") as pool:
            for f in [pool.submit(write, d) for d in stored]:
                f.result()
        return timestamp

    def _readable_time(self) -> int:
        """The oracle's read time, or later where a dataset's since is later (a view created
        in this run becomes readable from the time its dataflow starts at)."""
        rt = self.env.runtime
        timestamp = rt.oracle.read_ts()
        for d in self.stored():
            item = rt.catalog.find(d.name)
            if item is None:
                continue
            since = rt.storage.collection_frontiers(item.id).since.as_option()
            if since is not None:
                timestamp = max(timestamp, since)
        return timestamp

    def run(self) -> RunResult:
        started = time.perf_counter()
        created = self.install()
        installed = time.perf_counter()
        synced = self.sync()
        inputs = time.perf_counter()
        timestamp = self.write_outputs()
        counts = self.expectation_counts(timestamp)
        seconds = (
            ("install", installed - started),
            ("inputs", inputs - installed),
            ("outputs", time.perf_counter() - inputs),
        )
        return RunResult(synced.files, synced.rows, created, timestamp, seconds, counts)


def keep_up_to_date(
    runner: PipelineRunner,
    stop: threading.Event,
    *,
    interval: float = 0.05,
    outputs_every: float = 30.0,
) -> None:
    """Until ``stop``: write the input files' changes as they appear (a look every
    ``interval`` seconds lists the input directories), and the datasets' Parquet after them,
    at most once every ``outputs_every`` seconds (``spate pipeline serve``'s loop; run it in a
    thread). The Parquet is written by a thread of its own, as of the latest time when it gets
    to it, so writing it never delays taking in the next file; each write rewrites every
    dataset whole, which is why it is spaced out."""
    name = runner.pipeline.spec.name
    changed = threading.Event()

    def outputs() -> None:
        while not stop.is_set():
            if not changed.wait(0.5):
                continue
            if stop.wait(outputs_every):
                return
            changed.clear()
            try:
                runner.expectation_counts(runner.write_outputs(cancel=stop))
            except Exception:
                if stop.is_set():
                    return  # canceled: serve is stopping
                _log.exception("pipeline %s: writing the datasets' Parquet failed", name)
                changed.set()  # try again at the next round
                stop.wait(interval)

    writer = threading.Thread(target=outputs, name="pipeline-outputs", daemon=True)
    writer.start()
    try:
        while not stop.is_set():
            try:
                if runner.sync().files:
                    changed.set()
            except Exception:
                _log.exception("pipeline %s: bringing the datasets up to date failed; retrying",
                               name)  # fmt: skip
            stop.wait(interval)
    finally:
        writer.join()
