"""The reference oracle: what a whole dataflow must produce at every time, in plain Python.

**The defining semantics.** The contents of a view at time ``t`` are its plan evaluated on the
contents of its inputs accumulated at ``t`` (every update with ``time <= t``), with
``now() = t``. :func:`evaluate` (:mod:`spate.plan.evaluation`) computes exactly that for one
plan and one time; :func:`expected_contents` and :func:`expected_updates` apply it to a whole
:class:`~spate.plan.dataflow.DataflowDescription` at every time of an interval, which is what an
incremental renderer must reproduce at every time ``>= as_of``. A test oracle only.

Collections are multisets: ``Counter[Row]`` mapping each row to its multiplicity (never 0, may be
negative). Rows hold canonical datums (:func:`~spate.plan.evaluation.values.canonical`).
Nothing here is fast; everything here should be obviously right.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription
from spate.plan.errors import EvalError
from spate.plan.evaluation.relation import (
    Multiset,
    aggregate,
    compare_ordered,
    consolidated,
    evaluate,
    table_function,
)
from spate.plan.evaluation.scalar import compile_scalar
from spate.plan.evaluation.values import canonical_row
from spate.plan.temporal import TemporalBounds
from spate.repr.desc import Column
from spate.repr.types import Row

__all__ = [
    "Multiset",
    "Update",
    "accumulate",
    "aggregate",
    "compare_ordered",
    "consolidated",
    "differences",
    "evaluate",
    "evaluate_dataflow",
    "expected_contents",
    "expected_updates",
    "export_times",
    "table_function",
    "validity_interval",
]

Update = tuple[Row, int, int]
"""``(row, time, diff)``."""


def accumulate(updates: Iterable[Update], timestamp: int) -> Multiset:
    """The contents at ``timestamp``: Σ diff per row over updates with ``time <= timestamp``."""
    return consolidated((row, diff) for row, time, diff in updates if time <= timestamp)


# --- temporal filters ------------------------------------------------------------------------


def validity_interval(
    bounds: TemporalBounds, columns: Sequence[Column], row: Row
) -> tuple[int, int | None] | None:
    """``[lower, upper)`` of the logical times at which a temporal filter keeps ``row``.

    ``None`` when it never does: an ordinary predicate is not TRUE, a bound is NULL, or the
    interval is empty. ``upper = None`` means no upper bound. See :mod:`spate.plan.temporal`.
    """
    row = canonical_row(row, columns)
    for p in bounds.predicates:
        if compile_scalar(p, columns)(row, 0) is not True:
            return None
    lowers: list[int] = []
    uppers: list[int] = []
    for exprs, into in ((bounds.lower, lowers), (bounds.upper, uppers)):
        for e in exprs:
            v = compile_scalar(e, columns)(row, 0)
            if v is None:
                return None
            assert isinstance(v, int)
            into.append(v)
    lower = max([0, *lowers])
    upper = min(uppers) if uppers else None
    if upper is not None and upper <= lower:
        return None
    return lower, upper


# --- whole dataflows -------------------------------------------------------------------------


def evaluate_dataflow(
    dataflow: DataflowDescription, inputs: Mapping[GlobalId, Mapping[Row, int]], now: int
) -> dict[GlobalId, Multiset]:
    """Every imported and built collection of ``dataflow`` at one time, by id."""
    env: dict[GlobalId, Mapping[Row, int]] = dict(inputs)
    out: dict[GlobalId, Multiset] = {}
    for build in dataflow.objects_to_build:
        result = evaluate(build.plan, env, now)
        env[build.id] = result
        out[build.id] = result
    for id in (*(s.id for s in dataflow.source_imports), *_index_collections(dataflow)):
        if id not in out:
            if id not in inputs:
                raise EvalError(f"no input updates given for imported collection {id}")
            out[id] = consolidated(inputs[id].items())
    return out


def _index_collections(dataflow: DataflowDescription) -> list[GlobalId]:
    return [ix.index.on_id for ix in dataflow.index_imports]


def export_times(dataflow: DataflowDescription, *, upper: int) -> list[int]:
    """The times ``t`` with ``as_of <= t < upper`` and ``t`` not beyond ``until``."""
    if dataflow.as_of is None:
        raise EvalError("the dataflow has no as_of")
    if dataflow.as_of.is_empty():
        return []
    (as_of,) = dataflow.as_of.elements
    stop = upper
    if not dataflow.until.is_empty():
        stop = min(stop, dataflow.until.elements[0])
    return list(range(as_of, stop))


def expected_contents(
    dataflow: DataflowDescription,
    updates: Mapping[GlobalId, Iterable[Update]],
    *,
    upper: int,
) -> dict[GlobalId, dict[int, Multiset]]:
    """For every export, its contents at every time in ``[as_of, upper)`` (and below ``until``).

    ``updates`` are the input collections' update streams, keyed by collection id (a source
    import's id, or an index import's ``on_id``). An index export holds the contents of its
    ``on_id``; a sink export those of its ``from_id`` (times at or beyond ``up_to`` omitted).
    """
    streams = {id: list(u) for id, u in updates.items()}
    out: dict[GlobalId, dict[int, Multiset]] = {e: {} for e in dataflow.export_ids()}
    for t in export_times(dataflow, upper=upper):
        inputs = {id: accumulate(u, t) for id, u in streams.items()}
        collections = evaluate_dataflow(dataflow, inputs, t)
        for ix in dataflow.index_exports:
            out[ix.id][t] = collections[ix.index.on_id]
        for sink in dataflow.sink_exports:
            if sink.up_to.is_empty() or t < sink.up_to.elements[0]:
                out[sink.id][t] = collections[sink.from_id]
    return out


def differences(contents: Mapping[int, Multiset]) -> list[Update]:
    """The updates that take a collection through ``contents`` (time → multiset), in time
    order: the first time's contents, then each change, consolidated."""
    out: list[Update] = []
    previous: Multiset = Counter()
    for t in sorted(contents):
        current = contents[t]
        for row in sorted(set(previous) | set(current), key=repr):
            diff = current.get(row, 0) - previous.get(row, 0)
            if diff:
                out.append((row, t, diff))
        previous = current
    return out


def expected_updates(
    dataflow: DataflowDescription,
    updates: Mapping[GlobalId, Iterable[Update]],
    *,
    upper: int,
) -> dict[GlobalId, list[Update]]:
    """For every export, the consolidated updates in ``[as_of, upper)``: the snapshot at
    ``as_of`` (at time ``as_of``), then the changes. What a subscribe with snapshot emits."""
    return {
        id: differences(by_time)
        for id, by_time in expected_contents(dataflow, updates, upper=upper).items()
    }
