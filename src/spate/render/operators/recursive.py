"""Recursive (``WITH RECURSIVE``): the fixpoint re-derived at every time its inputs change.

Naive incremental recursion (feeding each round's new rows back as a delta) is wrong under
deletions: a retracted edge must retract every path derived through it, including those that
also have other derivations. This operator does not try: the node keeps the accumulated
contents of every collection its plan reads (``Get`` leaves anywhere below it), and for a step
over ``[lo, hi)`` it

1. applies the step's input updates time by time (times below ``lo`` advanced to ``lo``);
2. at every time where some input changed (and at ``lo`` on the hydration step, so that a
   recursion over constants appears), evaluates the whole ``Recursive`` node on the contents
   at that time with the reference evaluator (:mod:`spate.plan.evaluation`), i.e. PostgreSQL's
   iteration to a fixpoint;
3. emits ``result(t) - result(previous time)``.

So the output is exact at every time, deletions included. **Cost**: every changed time costs
the whole fixpoint (iterations × the working tables, plus the non-recursive sub-plans once), in
plain Python on the driver, and the node holds its inputs' contents in driver memory: fit for
recursive queries over up to some hundred thousand rows (graphs, hierarchies, counters), not
for big data. A step whose inputs did not change costs nothing.

An evaluation error (a recursion still producing rows after ``max_iterations`` rounds, a
division by zero…) does not fail the dataflow: the node's output at that time is empty and the
error is an error record (:mod:`spate.render.errors`) until a later change makes the fixpoint
evaluate again, so reads of the affected times fail with the error and later ones recover.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from spate.errors import error_record
from spate.ids import GlobalId
from spate.plan.errors import EvalError
from spate.plan.evaluation.relation import evaluate
from spate.plan.evaluation.values import canonical_row
from spate.plan.recursive import Recursive
from spate.plan.relation import Filter, Get
from spate.render.batch import Lazy
from spate.render.errors import ERROR_COLUMN, ERROR_SCHEMA
from spate.render.layout import to_internal
from spate.render.operators.node import StepContext
from spate.repr.arrow import table_to_updates, updates_to_table
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import Row

Multiset = Counter[Row]


def reads(plan: Recursive) -> dict[GlobalId, RelationDesc]:
    """The collections ``plan`` reads; refuses temporal filters (the fixpoint is re-derived
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
    _contents: dict[GlobalId, Multiset] = field(default_factory=dict)
    _output: Multiset = field(default_factory=Counter)
    _error: str | None = None

    def step(self, ctx: StepContext) -> Lazy:
        changes: dict[int, list[tuple[GlobalId, Row, int]]] = {}
        for id in self.inputs:
            batch = ctx.collections.get(id)
            if batch is None or batch.is_empty:
                continue
            columns = self.inputs[id].columns
            for row, time, diff in table_to_updates(batch.arrow()):
                key = canonical_row(row, columns)
                changes.setdefault(max(time, ctx.lo), []).append((id, key, diff))
        if ctx.first:
            changes.setdefault(ctx.lo, [])
        if not changes:
            return Lazy.empty()
        contents = {id: Counter(self._contents.get(id, ())) for id in self.inputs}
        output, error = self._output, self._error
        updates: list[tuple[Row, int, int]] = []
        errors: list[tuple[str, int, int]] = []
        for time in sorted(changes):
            for id, row, diff in changes[time]:
                held = contents[id]
                held[row] += diff
                if held[row] == 0:
                    del held[row]
            try:
                new: Multiset = evaluate(self.plan, contents, time)
                new_error = None
            except EvalError as e:
                new, new_error = Counter(), error_record(e.sqlstate, str(e), "WITH RECURSIVE", "")
            for row in new.keys() | output.keys():
                d = new[row] - output[row]
                if d:
                    updates.append((row, time, d))
            if new_error != error:
                if error is not None:
                    errors.append((error, time, -1))
                if new_error is not None:
                    errors.append((new_error, time, 1))
            output, error = new, new_error

        def commit() -> None:
            self._contents, self._output, self._error = contents, output, error

        ctx.on_commit(commit)
        if errors:
            ctx.errors.append(
                pa.table(
                    {
                        ERROR_COLUMN: [e for e, _, _ in errors],
                        TIME_COLUMN: [t for _, t, _ in errors],
                        DIFF_COLUMN: [d for _, _, d in errors],
                    },
                    schema=ERROR_SCHEMA,
                )
            )
        if not updates:
            return Lazy.empty()
        table = to_internal(updates_to_table(self.desc, updates), self.desc)
        return ctx.engine.lazy_of_batch(ctx.engine.batch_of_table(table, self.desc))

    def drop(self) -> None:
        self._contents, self._output, self._error = {}, Counter(), None
