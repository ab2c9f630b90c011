"""Errors of materialized views as their readers see them on this replica.

A materialized view's shard holds its rows only; its evaluation errors live in the error
collection of the dataflow that writes it (``spate.render.errors``). A read on this replica of
the view's shard, or of a dataflow that imports it (an index on the view, a SELECT over it),
fails at a time where that writer — or, transitively, the writer of a view it imports — holds
errors. (A view written on another cluster is not seen here: its own reads fail.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from spate.compute.replica.render_api import RenderedDataflow
from spate.errors import EvaluationFailed, Problem
from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription


class Running(Protocol):
    @property
    def description(self) -> DataflowDescription: ...

    @property
    def dataflow(self) -> RenderedDataflow: ...

    @property
    def sinks(self) -> Mapping[GlobalId, object]: ...


def _writer_error(
    running: list[Running], view: GlobalId, timestamp: int, seen: set[GlobalId]
) -> Problem | None:
    if view in seen:
        return None
    seen.add(view)
    for r in running:
        if view in r.sinks:
            return r.dataflow.error_at(timestamp) or _imports_error(running, r, timestamp, seen)
    return None


def _imports_error(
    running: list[Running], reader: Running, timestamp: int, seen: set[GlobalId]
) -> Problem | None:
    for imp in reader.description.source_imports:
        problem = _writer_error(running, imp.id, timestamp, seen)
        if problem is not None:
            return problem
    return None


def error_through(running: Iterable[Running], reader: Running, timestamp: int) -> Problem | None:
    """Why reads of ``reader``'s exports fail at ``timestamp``: its own errors, else those of a
    view it imports (module docs); ``None`` if there are none."""
    own = reader.dataflow.error_at(timestamp)
    return own if own is not None else _imports_error(list(running), reader, timestamp, set())


def check_view(running: Iterable[Running], view: GlobalId, timestamp: int) -> None:
    """Raise :class:`~spate.errors.EvaluationFailed` if a read of ``view``'s shard at
    ``timestamp`` meets errors (module docs)."""
    problem = _writer_error(list(running), view, timestamp, set())
    if problem is not None:
        raise EvaluationFailed(problem.message, problem.sqlstate or "22000", problem.pg_message)


def check_imports(running: Iterable[Running], reader: Running, timestamp: int) -> None:
    """Raise :class:`~spate.errors.EvaluationFailed` if a view ``reader`` imports holds errors
    at ``timestamp`` (module docs)."""
    problem = _imports_error(list(running), reader, timestamp, set())
    if problem is not None:
        raise EvaluationFailed(problem.message, problem.sqlstate or "22000", problem.pg_message)
