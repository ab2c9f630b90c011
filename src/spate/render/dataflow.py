"""A running dataflow on a SparkSession: hydrate, step, peek, compact.

``Dataflow(description, resolver, spark=…, scratch=…)`` validates the description (bad plans
fail here, before any Spark job) and builds the operator nodes. Its ``upper`` starts at the
``as_of``: nothing is computed yet. Each :meth:`step` advances it to a target upper (by default
:meth:`ready_upper`, the meet of the inputs' uppers and the ``until``):

* the first step reads each import's snapshot at ``as_of`` (times advanced to it) together
  with its updates up to the target, and hydrates every arrangement from empty;
* later steps read each import's updates in ``[upper, target)``; a step whose inputs did not
  change and which has no temporal retraction falling due runs no Spark job at all.

Every export is exact at every time ``>= as_of`` (see :mod:`spate.render.operators`): index
exports are arrangements that :meth:`peek` reads at any time in ``[since, upper)``; sink exports
(materialized views, subscribes) are returned by :meth:`step` as the updates of the interval.
A step that fails (an evaluation error, Spark failing) changes no state and can be retried.

**Errors as data.** Steps first run without looking for evaluation errors (a failing expression
fails the Spark job). When a step fails, it is run again in capture mode, and the dataflow stays
in it: Map, Filter, Reduce and a join's residual predicates route each failing row (group,
joined row) to the dataflow's :class:`~spate.render.errors.ErrorCollection`, with its time and
multiplicity, and pass the rest on. A peek at a time where the error collection is not empty
fails with the first record (:func:`spate.errors.describe_error`); retracting the input
retracts the error. FlatMap, Window and temporal filters have their failing input rows split
off first (:mod:`spate.render.operators.capture`). (An aggregate of a window frame beyond its
type still fails the step.)
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import Problem, SpateError, UsageError
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.persist import latency_trace
from spate.plan.dataflow import DataflowDescription
from spate.plan.errors import InvalidDataflow
from spate.plan.finishing import RowSetFinishing
from spate.render.arrangement import Arrangement, ReadBeforeSince
from spate.render.batch import Batch, Engine, EngineSettings
from spate.render.errors import (
    ERROR_SCHEMA,
    ErrorCollection,
    consolidate_errors,
    raised_sqlstate,
)
from spate.render.input import ArrowInput, ImportedErrors, InputData, InputResolver
from spate.render.layout import to_external, to_internal
from spate.render.operators.build import Builder
from spate.render.operators.node import Node, StepContext
from spate.render.peek import contents_at, finish, lookup, name_result
from spate.render.phases import PhaseTimes
from spate.repr.arrow import updates_schema
from spate.repr.consolidate import advance_times
from spate.repr.desc import TIME_COLUMN, RelationDesc
from spate.repr.types import Row

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log: Final = logging.getLogger("spate.render.dataflow")

FOREVER: Final = 2**62
"""Stands for the empty frontier inside a step (inputs closed: every update is known)."""

__all__ = ["Dataflow", "DataflowError", "ReadBeforeSince", "StepReport"]


class DataflowError(SpateError):
    """A step of a dataflow failed (evaluation error, Spark failure); nothing changed.
    ``sqlstate``: the evaluation error's code (``None``: Spark failed otherwise)."""

    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class CollectionInError(UsageError, RuntimeError):
    """A read at a time where the dataflow's error collection is not empty (the message is
    :func:`spate.errors.describe_error`'s; ``sqlstate`` the first record's)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.sqlstate = problem.sqlstate or "22000"
        self.pg_message = problem.pg_message or problem.message


@dataclass(frozen=True)
class StepReport:
    """What one step produced: the sink exports' updates (external layout) in ``[lower, upper)``."""

    lower: Frontier
    upper: Frontier
    sink_updates: dict[GlobalId, pa.Table] = field(default_factory=dict)
    seconds: float = 0.0
    idle: bool = False
    actions: int = 0
    """Spark actions the step ran."""
    rows_in: int = 0
    """Input updates the step read (the imports' batches, as read)."""
    rows_out: int = 0
    """Updates the step produced into its exports (indexes' batches and sinks' updates)."""
    errors: pa.Table = field(default_factory=ERROR_SCHEMA.empty_table)
    """The step's updates of the error collection (:data:`~spate.render.errors.ERROR_SCHEMA`,
    consolidated): what a materialized view's errors shard gets for ``[lower, upper)``."""


@dataclass
class _Index:
    on_id: GlobalId
    key: tuple[int, ...]
    desc: RelationDesc
    arrangement: Arrangement


class Dataflow:
    """A running dataflow (module docs)."""

    def __init__(
        self,
        description: DataflowDescription,
        resolver: InputResolver,
        *,
        spark: SparkSession,
        scratch: Path,
        name: str | None = None,
        settings: EngineSettings | None = None,
    ) -> None:
        description.validate()
        as_of = description.as_of
        if as_of is None or as_of.is_empty():
            raise InvalidDataflow(
                f"dataflow {description.debug_name!r}: needs a non-empty as_of, got {as_of}"
            )
        (self._as_of,) = as_of.elements
        self.description = description
        self.name = name or description.debug_name or "dataflow"
        self._resolver = resolver
        self._imports: dict[GlobalId, tuple[GlobalId, RelationDesc]] = {}
        for s in description.source_imports:
            self._imports[s.id] = (s.id, s.desc)
        for i in description.index_imports:
            self._imports[i.index.on_id] = (i.id, i.desc)
        for on_id, (read_id, _) in self._imports.items():
            since = resolver.since(read_id)
            if not since.less_equal(self._as_of):
                raise InvalidDataflow(
                    f"dataflow {self.name}: import {read_id} (collection {on_id}) has since "
                    f"{since}, beyond the as_of {as_of}"
                )
        until = description.until
        self._until: int | None = None if until.is_empty() else until.elements[0]
        self._engine = Engine(spark, scratch / _safe(self.name), settings)
        builder = Builder(_safe(self.name))
        self._objects: list[tuple[GlobalId, Node]] = [
            (b.id, builder.build(b.plan)) for b in description.objects_to_build
        ]
        self._temporal = builder.temporal
        exported = {ix.index.on_id for ix in description.index_exports}
        exported |= {s.from_id for s in description.sink_exports}
        self._demand: dict[GlobalId, tuple[int, ...] | None] = {}
        """The columns of each import the dataflow uses (``None``: all)."""
        for on_id in self._imports:
            used = builder.demand.get(on_id)
            self._demand[on_id] = None if used is None or on_id in exported else tuple(sorted(used))
        self._indexes: dict[GlobalId, _Index] = {
            ix.id: _Index(
                ix.index.on_id,
                ix.index.key,
                ix.desc,
                Arrangement(self._engine, ix.desc, f"{ix.id}", as_of=self._as_of, internal=False),
            )
            for ix in description.index_exports
        }
        self._sinks = {s.id: s for s in description.sink_exports}
        self._dropped_sinks: set[GlobalId] = set()
        self._upper: int | None = self._as_of
        self._hydrated = False
        self.steps = 0
        self.errors = ErrorCollection()
        """Evaluation errors (module docs)."""
        self._capture = False
        self._canceled = False

    # -- frontiers ----------------------------------------------------------------------------

    @property
    def upper(self) -> Frontier:
        """Every export is complete below this frontier (``{as_of}`` before the first step)."""
        return Antichain.empty() if self._upper is None else Antichain.of(self._upper)

    @property
    def hydrated(self) -> bool:
        return self._hydrated

    def ready_upper(self) -> Frontier:
        """How far a step could go now: the meet of the inputs' uppers and the until."""
        ready: Frontier = Antichain.empty()
        for read_id, _ in self._imports.values():
            ready = ready.meet(self._resolver.upper(read_id))
        if self._until is not None:
            ready = ready.meet(Antichain.of(self._until))
        return ready

    # -- stepping -----------------------------------------------------------------------------

    def step(self, upper: Frontier | None = None) -> StepReport:
        """Advance to ``upper`` (default :meth:`ready_upper`); return the sinks' updates."""
        target = self.ready_upper() if upper is None else upper
        lo = self._upper
        if lo is None or not self.upper.less_than(target):
            return StepReport(self.upper, self.upper, idle=True)
        ready = self.ready_upper()
        if not target.less_equal(ready):
            raise UsageError(
                f"dataflow {self.name}: cannot step to {target}: the inputs are complete only "
                f"below {ready}"
            )
        hi = FOREVER if target.is_empty() else target.elements[0]
        if not self._hydrated and hi > self._as_of + 1:
            # Hydrate from the snapshot alone (every update at the as_of: operators take their
            # fast paths), then step over the rest.
            snap = self.step(Antichain.of(self._as_of + 1))
            rest = self.step(target)
            return StepReport(
                snap.lower,
                rest.upper,
                _concat(snap.sink_updates, rest.sink_updates),
                seconds=snap.seconds + rest.seconds,
                actions=snap.actions + rest.actions,
                rows_in=snap.rows_in + rest.rows_in,
                rows_out=snap.rows_out + rest.rows_out,
                errors=consolidate_errors(pa.concat_tables([snap.errors, rest.errors])),
            )
        try:
            return self._step_once(lo, hi, target)
        except DataflowError as e:
            if self._capture or self._canceled:
                raise
            _log.info("dataflow %s: step failed (%s); again, capturing errors", self.name, e)
            self._capture = True
            return self._step_once(lo, hi, target)

    def _step_once(self, lo: int, hi: int, target: Frontier) -> StepReport:
        started = time.perf_counter()
        actions = self._engine.actions
        first = not self._hydrated
        start = self._as_of if first else lo
        ctx = StepContext(
            self._engine,
            start,
            hi,
            first,
            collections={},
            capture=self._capture,
            canceled=lambda: self._canceled,
        )
        phases = PhaseTimes()
        latency_trace.mark("step_start", self.name, hi)
        try:
            for on_id, (read_id, desc) in self._imports.items():
                with phases.timed(f"read {on_id}"):
                    batch = self._read_import(on_id, read_id, desc, start, hi, first)
                ctx.collections[on_id] = batch
                if isinstance(self._resolver, ImportedErrors):  # a view in error: ours too
                    found = self._resolver.imported_errors(
                        read_id, lower=start, upper=hi, first=first
                    )
                    if found is not None and found.num_rows:
                        ctx.errors.append(found)
            rows_in = sum(b.rows for b in ctx.collections.values())
            if not first and not ctx.errors and self._idle(ctx, hi):
                self._advance_idle(hi)
                self._finish_step(hi, target)
                return StepReport(Antichain.of(lo), self.upper, idle=True)
            for id, node in self._objects:
                with phases.timed(f"compute {id}"):
                    ctx.collections[id] = ctx.materialize(node.step(ctx), node.desc)
            with phases.timed("exports"):
                sink_updates = self._exports(ctx, first)
            rows_out = sum(ctx.collections[ix.on_id].rows for ix in self._indexes.values())
            rows_out += sum(t.num_rows for t in sink_updates.values())
        except SpateError:
            self._engine.end_step()
            raise
        except Exception as e:  # Spark / py4j failures, evaluation errors inside Spark
            self._engine.end_step()
            raise DataflowError(
                f"dataflow {self.name}: step [{start}, {hi}) failed: {_short(e)}",
                raised_sqlstate(e),
            ) from e
        with phases.timed("commit"):
            for commit in ctx.commits:
                commit()
        step_errors = [t.cast(ERROR_SCHEMA) for t in ctx.errors if t.num_rows]
        errors = consolidate_errors(pa.concat_tables(step_errors)) if step_errors else None
        if errors is not None:
            self.errors.append([errors])
        self._engine.end_step()
        self._finish_step(hi, target)
        if errors is not None or self._sinks:
            self._compact_errors()
        if first:
            _log.info("dataflow %s: hydrated in %s", self.name, phases.summary())
        self._hydrated = True
        self.steps += 1
        latency_trace.mark("step_end", self.name, hi)
        return StepReport(
            Antichain.of(start),
            self.upper,
            sink_updates,
            seconds=time.perf_counter() - started,
            actions=self._engine.actions - actions,
            rows_in=rows_in,
            rows_out=rows_out,
            errors=ERROR_SCHEMA.empty_table() if errors is None else errors,
        )

    def _finish_step(self, hi: int, target: Frontier) -> None:
        self._upper = None if target.is_empty() else hi

    def _idle(self, ctx: StepContext, hi: int) -> bool:
        if any(not b.is_empty for b in ctx.collections.values()):
            return False
        return not any(t.has_pending_before(hi) for t in self._temporal)

    def _advance_idle(self, hi: int) -> None:
        """Nothing changes in ``[upper, hi)``: only the indexes' frontiers move (no Spark job).
        (Operators' own arrangements only need updates before each step's lower, which they
        already hold.)"""
        for ix in self._indexes.values():
            ix.arrangement.append(Batch(ix.desc), hi)

    def _read_import(
        self, on_id: GlobalId, read_id: GlobalId, desc: RelationDesc, lo: int, hi: int, first: bool
    ) -> Batch:
        parts: list[pa.Table] = []
        if first:
            snapshot = self._resolver.snapshot(read_id, as_of=lo)
            parts.append(self._arrow(snapshot, desc, 0, lo + 1, self._demand.get(on_id)))
            if hi > lo + 1:
                parts.append(
                    self._arrow(
                        self._resolver.updates(read_id, lower=lo + 1, upper=hi), desc, lo + 1, hi
                    )
                )
        else:
            parts.append(
                self._arrow(self._resolver.updates(read_id, lower=lo, upper=hi), desc, lo, hi)
            )
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if first:
            table = advance_times(table, lo)
        # A large snapshot stays unconsolidated until a consumer needs it (spate.render.batch).
        return self._engine.batch_of_table(table, desc, consolidated=not first)

    @staticmethod
    def _arrow(
        data: InputData,
        desc: RelationDesc,
        lo: int,
        hi: int,
        columns: tuple[int, ...] | None = None,
    ) -> pa.Table:
        """``data``'s updates in ``[lo, hi)`` in the internal layout. With ``columns``, files
        are read for those columns only, the others being NULL: nothing reads them (a large
        snapshot of a wide collection costs the columns its dataflow uses)."""
        if isinstance(data, ArrowInput):
            table = to_internal(data.table, desc)
        elif data.paths and columns is not None and len(columns) < desc.arity:
            picked = data.read([desc.columns[i].name for i in columns])  # and _time, _diff
            full = updates_schema(desc)
            arrays = [
                picked.column(f.name)
                if i in columns or i >= desc.arity
                else pa.nulls(picked.num_rows, f.type)
                for i, f in enumerate(full)
            ]
            table = to_internal(pa.Table.from_arrays(arrays, names=full.names), desc)
        elif data.paths:
            table = to_internal(data.read(), desc)
        else:
            table = to_internal(updates_schema(desc).empty_table(), desc)
        times = table.column(TIME_COLUMN)
        return table.filter(pc.and_(pc.greater_equal(times, lo), pc.less(times, hi)))

    def _exports(self, ctx: StepContext, first: bool) -> dict[GlobalId, pa.Table]:
        for ix in self._indexes.values():
            batch = ctx.collections[ix.on_id]
            arr = ix.arrangement
            ctx.on_commit(functools.partial(arr.append, batch, ctx.hi))
        out: dict[GlobalId, pa.Table] = {}
        for id, sink in self._sinks.items():
            if id in self._dropped_sinks:
                continue
            batch = ctx.collections[sink.from_id]
            table = ctx.materialize(ctx.engine.lazy_of_batch(batch), sink.from_desc).arrow()
            times = table.column(TIME_COLUMN)
            if first and not sink.with_snapshot:
                table = table.filter(pc.greater(times, self._as_of))
                times = table.column(TIME_COLUMN)
            if not sink.up_to.is_empty():
                table = table.filter(pc.less(times, sink.up_to.elements[0]))
            out[id] = to_external(table, sink.from_desc)
        return out

    # -- reads --------------------------------------------------------------------------------

    def arrangement(self, export: GlobalId) -> Arrangement:
        ix = self._indexes.get(export)
        if ix is None:
            known = ", ".join(str(i) for i in self._indexes) or "none"
            raise UsageError(
                f"dataflow {self.name}: {export} is not an index export; indexes: {known}"
            )
        return ix.arrangement

    def peek(
        self,
        export: GlobalId,
        *,
        timestamp: int,
        finishing: RowSetFinishing | None = None,
        literal_constraints: Sequence[Row] | None = None,
        result_desc: RelationDesc | None = None,
    ) -> pa.Table:
        """The contents of index ``export`` at ``timestamp``, finished; rows in the layout of
        ``result_desc`` (default: the index's collection)."""
        ix = self._indexes.get(export)
        if ix is None:
            self.arrangement(export)  # raises naming the indexes
            raise AssertionError
        arr = ix.arrangement
        arr.check_readable(timestamp)
        self.check_errors(timestamp)
        updates = arr.updates()
        if literal_constraints is not None:
            updates = lookup(updates, ix.desc, ix.key, literal_constraints)
        contents = contents_at(updates, timestamp, what=f"index {export}")
        finished = finish(contents, finishing or RowSetFinishing(), ix.desc.arity)
        if result_desc is None:
            if finishing is not None and finishing.project is not None:
                return finished
            result_desc = ix.desc
        return name_result(finished, result_desc)

    def error_at(self, timestamp: int) -> Problem | None:
        """What a read at ``timestamp`` fails with (:func:`spate.errors.describe_error`, the
        first record's SQLSTATE), or ``None`` when the error collection is empty there."""
        found = self.errors.at(timestamp)
        if not found:
            return None
        return Problem.of_record(self.name, found[0][0], sum(n for _, n in found))

    def check_errors(self, timestamp: int) -> None:
        """Raise :class:`CollectionInError` if the error collection is not empty at
        ``timestamp``."""
        problem = self.error_at(timestamp)
        if problem is not None:
            raise CollectionInError(problem)

    # -- compaction and drop ------------------------------------------------------------------

    def allow_compaction(self, export: GlobalId, frontier: Frontier) -> None:
        """Reads of ``export`` below ``frontier`` may fail from now on; ``{}`` drops it."""
        if export in self._indexes:
            self._indexes[export].arrangement.allow_compaction(frontier)
            self._compact_errors()
        elif export in self._sinks:
            if frontier.is_empty():
                self._dropped_sinks.add(export)
        else:
            raise UsageError(f"dataflow {self.name}: no export {export}")

    def _compact_errors(self) -> None:
        """Error history is kept as far back as reads of the exports go: an index's since; a
        sink's updates are handed on at each step (a view's errors go to its errors shard,
        where they are compacted with the view), so for sinks only the present is kept."""
        sinces = [ix.arrangement.since.as_option() for ix in self._indexes.values()]
        live = [t for t in sinces if t is not None]
        if self._sinks and self._upper is not None and self._upper > self._as_of:
            live.append(self._upper - 1)
        if live:
            self.errors.compact(min(live))

    def defer_merges(self) -> None:
        """From now on, arrangements leave their merges to :meth:`maintain`, which the caller
        runs between steps (:mod:`spate.render.arrangement`)."""
        self._engine.defer_merges = True

    def maintain(self) -> bool:
        """Do one piece of the work steps left for later (an arrangement's merges); False when
        none was left."""
        return self._engine.run_deferred()

    def cancel(self) -> None:
        """The dataflow is being dropped and its Spark jobs cancelled (any thread): a step
        that fails now is not tried again capturing errors."""
        self._canceled = True

    def drop(self) -> None:
        for _, node in self._objects:
            node.drop()
        for ix in self._indexes.values():
            ix.arrangement.drop()
        self._engine.close()


def _concat(a: dict[GlobalId, pa.Table], b: dict[GlobalId, pa.Table]) -> dict[GlobalId, pa.Table]:
    out = dict(a)
    for id, table in b.items():
        out[id] = pa.concat_tables([out[id], table]) if id in out else table
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:60] or "dataflow"


def _short(e: BaseException) -> str:
    lines = [line for line in str(e).strip().splitlines() if line.strip()]
    text = lines[0][:400] if lines else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
