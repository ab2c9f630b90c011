"""Recursive (``WITH RECURSIVE``): PostgreSQL's iteration to a fixpoint, computed in rounds of
the renderer's own operators, at every time of a step at once.

A step over ``[lo, hi)`` in which an input changed (or the hydration step) computes the
recursion's contents at every time of the step, from the inputs' whole contents:

* each input becomes one **stream**: its contents before the step (held by the node) at
  ``lo``, then the step's updates at their times — so that "the contents at time ``t``" is
  the stream accumulated to ``t``, for every ``t`` in ``[lo, hi)``;
* a **round** builds fresh operator nodes (:class:`~spate.render.operators.build.Builder`)
  for a plan over those streams and runs them as one hydration step ``[lo, hi)``: their output
  accumulated to ``t`` is the plan evaluated on the contents at ``t``, at every ``t`` at once
  (the renderer's operators are exact at every time). Joins, reduces, distincts run on Spark
  or on the driver as the engine's settings decide for any step;
* semi-naive iteration: the base gives the first working table ``W`` (``UNION``: each row
  once); each round evaluates the recursive term with ``RecursiveRef`` bound to ``W`` only —
  the last round's new rows —; for ``UNION`` the new working table is the rows not yet in the
  result ``R`` (``R' = Distinct(step ∪ R)``, ``W' = R' − R``), for ``UNION ALL`` all the
  term's rows (``R += W'``); the iteration stops when a round adds nothing at any time. A
  time whose fixpoint is reached produces nothing in later rounds (a term that could produce
  rows from an empty working table is joined with "the working table is not empty"), so
  every time sees exactly PostgreSQL's rounds;
* sub-plans of the term that do not read the working table are computed once per step;
* after ``max_iterations`` rounds, the times whose working table is still not empty are in
  error (SQLSTATE 54001) and the recursion's contents there are empty: reads of those times
  fail, never answer a truncated result; a later change that ends the recursion clears it.

The node emits the new contents minus what it emitted before (its output, held), so the
output is exact at every time, deletions included (a deleted edge retracts every path derived
through it, because every step derives the fixpoint anew). **Cost** per changed step: the
fixpoint's rounds (the longest recursion of the step's times) over the inputs' whole contents.
The inputs' contents and the output are held on the driver as Arrow tables between steps; a
step whose inputs did not change costs nothing. Evaluation errors inside rounds (capture mode)
join the node's errors at their times.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import error_record
from spate.ids import GlobalId
from spate.plan.recursive import (
    RECURSION_LIMIT_SQLSTATE,
    Recursive,
    RecursiveRef,
    iteration_limit_message,
    references,
)
from spate.plan.relation import (
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Reduce,
    RelationExpr,
    Union,
)
from spate.render.batch import Batch, Engine, Lazy
from spate.render.errors import ERROR_COLUMN, ERROR_SCHEMA
from spate.render.layout import internal_schema
from spate.render.operators.node import Node, StepCanceled, StepContext
from spate.repr.consolidate import accumulate_at, advance_times, consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc


def reads(plan: Recursive) -> dict[GlobalId, RelationDesc]:
    """The collections ``plan`` reads; refuses temporal filters (the fixpoint is derived anew
    only when an input changes, never when only the time passes)."""
    out: dict[GlobalId, RelationDesc] = {}
    for node in plan.walk():
        if isinstance(node, Get):
            out[node.id] = node.desc
        if isinstance(node, Filter) and node.is_temporal():
            raise TypeError("cannot render a temporal filter inside a Recursive node")
    return out


@dataclass
class RecursiveNode:
    plan: Recursive
    desc: RelationDesc
    inputs: dict[GlobalId, RelationDesc]
    builder: Callable[[str, RelationExpr], Node]
    """Builds a round's fresh nodes of a plan (:class:`~spate.render.operators.build.Builder`,
    given by it: this module is one of the operators it builds)."""
    name: str = "recursive"
    _held: dict[GlobalId, pa.Table] = field(default_factory=dict)
    """Each input's contents before the next step (internal layout, every time 0)."""
    _output: pa.Table | None = None
    """What the node emitted so far, accumulated (every time 0)."""
    _errors: Counter[str] = field(default_factory=Counter)
    """The node's error records so far, accumulated."""
    rounds: int = 0
    """Rounds run by the last step that computed (introspection, tests)."""

    def step(self, ctx: StepContext) -> Lazy:
        changed = {
            id: batch
            for id in self.inputs
            if (batch := ctx.collections.get(id)) is not None and not batch.is_empty
        }
        if not changed and not ctx.first:
            return Lazy.empty()
        streams: dict[GlobalId, pa.Table] = {}
        for id, desc in self.inputs.items():
            schema = internal_schema(desc)
            parts = [schema.empty_table()]
            held = self._held.get(id)
            if held is not None and held.num_rows:
                parts.append(_retimed(held, ctx.lo))
            if id in changed:
                parts.append(advance_times(changed[id].arrow(), ctx.lo).cast(schema))
            streams[id] = consolidate(pa.concat_tables(parts))
        rounds = _Rounds(self, ctx, streams)
        try:
            result, errors = rounds.fixpoint()
        finally:
            rounds.close()
        out_schema = internal_schema(self.desc)
        previous = self._output if self._output is not None else out_schema.empty_table()
        delta = consolidate(
            pa.concat_tables([result.cast(out_schema), _negated(_retimed(previous, ctx.lo))])
        )
        emitted_errors = _error_delta(self._errors, errors, ctx.lo)
        held = {id: _settled(s) for id, s in streams.items()}
        output = _settled(pa.concat_tables([previous, delta]))
        accumulated = Counter(self._errors)
        for record, diff in zip(
            emitted_errors.column(ERROR_COLUMN).to_pylist(),
            emitted_errors.column(DIFF_COLUMN).to_pylist(),
            strict=True,
        ):
            accumulated[record] += diff
        n = rounds.count

        def commit() -> None:
            self._held, self._output = held, output
            self._errors = Counter({r: m for r, m in accumulated.items() if m})
            self.rounds = n

        ctx.on_commit(commit)
        if emitted_errors.num_rows:
            ctx.errors.append(emitted_errors)
        if not delta.num_rows:
            return Lazy.empty()
        return ctx.engine.lazy_of_batch(ctx.engine.batch_of_table(delta, self.desc))

    def drop(self) -> None:
        self._held, self._output, self._errors = {}, None, Counter()


class _Rounds:
    """One step's fixpoint: its sub-engine (plan templates and files of fresh nodes, thrown
    away with it), the streams by id and the rounds."""

    def __init__(self, node: RecursiveNode, ctx: StepContext, streams: dict[GlobalId, pa.Table]):
        self.node = node
        self.ctx = ctx
        outer = ctx.engine
        self.engine = Engine(outer.spark, outer.fresh("recursive"), outer.settings)
        self.collections: dict[GlobalId, Batch] = {
            id: self.engine.batch_of_table(t, node.inputs[id]) for id, t in streams.items()
        }
        self.errors: list[pa.Table] = []
        self.count = 0
        self._ids = (GlobalId.transient(n) for n in itertools.count(1 << 40))
        self._builds = itertools.count()

    def close(self) -> None:
        self.ctx.engine.actions += self.engine.actions
        self.engine.close()

    def fresh_id(self) -> GlobalId:
        while True:
            id = next(self._ids)
            if id not in self.collections:
                return id

    def run(self, plan: RelationExpr) -> Batch:
        """``plan``'s contents at every time of the step, as updates (consolidated)."""
        ctx = self.ctx
        built = self.node.builder(f"{self.node.name}-{next(self._builds)}", plan)
        sub = StepContext(
            self.engine,
            ctx.lo,
            ctx.hi,
            True,
            collections=self.collections,
            capture=ctx.capture,
            canceled=ctx.canceled,
        )
        try:
            batch = sub.materialize(built.step(sub), plan.desc)
            batch.arrow()  # read now: the sub-engine's files go at its close
        finally:
            built.drop()
        self.errors.extend(t for t in sub.errors if t.num_rows)
        return batch

    def bind(self, batch: Batch) -> GlobalId:
        id = self.fresh_id()
        self.collections[id] = batch
        return id

    def fixpoint(self) -> tuple[pa.Table, list[pa.Table]]:
        """The recursion's contents (as updates from ``lo``) and its error records."""
        plan = self.node.plan
        desc = plan.desc
        step = self._fixed(plan.step, plan.binding)
        strict = _strict(step, plan.binding)
        base = Distinct(plan.base) if plan.dedupe else plan.base
        working = self.run(base)
        result = consolidate(working.arrow().cast(internal_schema(desc)))
        limit: list[tuple[int, int]] = []
        while not working.is_empty:
            if self.count == plan.max_iterations:
                limit = _live(working.arrow(), self.ctx.hi)
                break
            if self.ctx.canceled():  # dropped: a cycle would run every round left
                raise StepCanceled(f"{self.node.name}: dropped after {self.count} rounds")
            self.count += 1
            w = self.bind(working)
            term = _bind_ref(step, plan.binding, functools.partial(_get_of, w))
            if not strict:  # nothing at the times whose working table is empty
                live = Get(w, desc).project().distinct()
                term = Join((term, live), ()).project(*range(term.desc.arity))
            if plan.dedupe:  # the new result: each row of the result and the term once
                seen = self.bind(self.engine.batch_of_table(result, desc))
                grown = self.run(Distinct(Union((term, Get(seen, term.desc))))).arrow()
                grown = grown.cast(internal_schema(desc))
                new = consolidate(pa.concat_tables([grown, _negated(result)]))
                working = self.engine.batch_of_table(new, desc)
                result = grown
                continue
            working = self.run(term)
            new = working.arrow().cast(internal_schema(desc))
            result = consolidate(pa.concat_tables([result, new]))
        errors = list(self.errors)
        if limit:
            result = _emptied(result, limit, self.ctx.hi)
            errors.append(_limit_errors(plan.max_iterations, limit, self.ctx.hi))
        return result, errors

    def _fixed(self, plan: RelationExpr, binding: int) -> RelationExpr:
        """``plan`` with its largest sub-plans that do not read the working table (other than
        leaves) computed once and read as collections."""
        if not references(plan, binding):
            if isinstance(plan, (Get, Constant)):
                return plan
            return Get(self.bind(self.run(plan)), plan.desc)
        if isinstance(plan, Recursive) and plan.binding == binding:
            return plan  # shadows the binding: its step reads its own working table
        return _rebuilt(plan, lambda child: self._fixed(child, binding))


def _rebuilt(plan: RelationExpr, fn: Callable[[RelationExpr], RelationExpr]) -> RelationExpr:
    """``plan`` with each input replaced by ``fn(input)``."""
    changes: dict[str, object] = {}
    for f in dataclasses.fields(plan):  # type: ignore[arg-type]  # every node is a dataclass
        if not f.init:
            continue
        value = getattr(plan, f.name)
        if isinstance(value, RelationExpr):
            new = fn(value)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and value and all(isinstance(v, RelationExpr) for v in value):
            items = tuple(fn(v) for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    if not changes:
        return plan
    return dataclasses.replace(plan, **changes)  # type: ignore[type-var]  # every node is a dataclass


def _bind_ref(
    plan: RelationExpr, binding: int, fn: Callable[[RecursiveRef], RelationExpr]
) -> RelationExpr:
    """``plan`` with each ``RecursiveRef(binding)`` it reads replaced by ``fn(ref)`` (not those
    of a nested ``Recursive`` of the same binding, which are its own)."""
    if isinstance(plan, RecursiveRef):
        return fn(plan) if plan.binding == binding else plan
    if isinstance(plan, Recursive) and plan.binding == binding:
        base = _bind_ref(plan.base, binding, fn)
        return plan if base is plan.base else dataclasses.replace(plan, base=base)
    return _rebuilt(plan, lambda child: _bind_ref(child, binding, fn))


def _get_of(id: GlobalId, ref: RecursiveRef) -> RelationExpr:
    return Get(id, ref.relation)


def _strict(plan: RelationExpr, binding: int) -> bool:
    """Whether ``plan`` is surely empty when the working table ``binding`` is."""
    match plan:
        case RecursiveRef():
            return plan.binding == binding
        case Recursive():
            return _strict(plan.base, binding)
        case Join(operands, _, _):
            return any(_strict(o, binding) for o in operands)
        case Union(operands):
            return all(_strict(o, binding) for o in operands)
        case Reduce(inp, key, _, _):
            return bool(key) and _strict(inp, binding)
        case Get() | Constant():
            return False
    inputs = plan.inputs()
    return len(inputs) == 1 and _strict(inputs[0], binding)


def _retimed(table: pa.Table, time: int) -> pa.Table:
    idx = table.schema.get_field_index(TIME_COLUMN)
    return table.set_column(
        idx, table.schema.field(idx), pa.array([time] * table.num_rows, pa.int64())
    )


def _negated(table: pa.Table) -> pa.Table:
    idx = table.schema.get_field_index(DIFF_COLUMN)
    return table.set_column(idx, table.schema.field(idx), pc.negate(table.column(DIFF_COLUMN)))


def _settled(table: pa.Table) -> pa.Table:
    """The contents after every update of ``table`` (all at time 0)."""
    return consolidate(_retimed(table, 0))


def _live(working: pa.Table, hi: int) -> list[tuple[int, int]]:
    """The maximal intervals ``[a, b)`` of times (below ``hi``) where the updates ``working``
    (non-negative multiplicities at every time) accumulate to something."""
    if not working.num_rows:
        return []
    by_time = working.group_by(TIME_COLUMN, use_threads=False).aggregate([(DIFF_COLUMN, "sum")])
    by_time = by_time.sort_by(TIME_COLUMN)
    out: list[tuple[int, int]] = []
    total = 0
    start: int | None = None
    for time, diff in zip(
        by_time.column(TIME_COLUMN).to_pylist(),
        by_time.column(f"{DIFF_COLUMN}_sum").to_pylist(),
        strict=True,
    ):
        total += diff
        if total and start is None:
            start = time
        elif not total and start is not None:
            out.append((start, time))
            start = None
    if start is not None:
        out.append((start, hi))
    return out


def _emptied(result: pa.Table, intervals: list[tuple[int, int]], hi: int) -> pa.Table:
    """The updates ``result`` changed so that their contents are empty inside ``intervals``
    (and as before elsewhere)."""
    times = result.column(TIME_COLUMN)
    keep = pa.array([True] * result.num_rows, pa.bool_())
    parts: list[pa.Table] = []
    for a, b in intervals:
        inside = pc.and_(pc.greater_equal(times, a), pc.less_equal(times, b))
        keep = pc.and_(keep, pc.invert(inside))
        before = _without_diff_name(accumulate_at(result, a - 1), result.schema, a)
        parts.append(_negated(before))
        if b < hi:
            parts.append(_without_diff_name(accumulate_at(result, b), result.schema, b))
    return consolidate(pa.concat_tables([result.filter(keep), *parts]))


def _without_diff_name(contents: pa.Table, schema: pa.Schema, time: int) -> pa.Table:
    """``accumulate_at``'s contents (data columns, ``_diff``) as updates at ``time``."""
    data = [contents.column(i) for i in range(contents.num_columns - 1)]
    times = pa.array([time] * contents.num_rows, pa.int64())
    return pa.Table.from_arrays([*data, times, contents.column(DIFF_COLUMN)], schema=schema)


def _limit_errors(max_iterations: int, intervals: list[tuple[int, int]], hi: int) -> pa.Table:
    record = error_record(
        RECURSION_LIMIT_SQLSTATE, iteration_limit_message(max_iterations), "WITH RECURSIVE", ""
    )
    rows = [(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals if b < hi]
    return pa.table(
        {
            ERROR_COLUMN: [record] * len(rows),
            TIME_COLUMN: [t for t, _ in rows],
            DIFF_COLUMN: [d for _, d in rows],
        },
        schema=ERROR_SCHEMA,
    )


def _error_delta(previous: Counter[str], errors: list[pa.Table], lo: int) -> pa.Table:
    """The error records ``errors`` (from ``lo``) minus ``previous`` (held before ``lo``)."""
    gone = list(_records(previous))
    retract = pa.table(
        {
            ERROR_COLUMN: [r for r, _ in gone],
            TIME_COLUMN: [lo] * len(gone),
            DIFF_COLUMN: [-m for _, m in gone],
        },
        schema=ERROR_SCHEMA,
    )
    table = pa.concat_tables([retract, *(t.cast(ERROR_SCHEMA) for t in errors)])
    return consolidate(table) if table.num_rows else table


def _records(errors: Counter[str]) -> Iterator[tuple[str, int]]:
    return ((r, m) for r, m in errors.items() if m)
