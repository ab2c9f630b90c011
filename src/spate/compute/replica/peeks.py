"""Pending peeks of a replica (pure bookkeeping) and the wording of peek answers.

A peek is *pending* from its ``Peek`` command until it is answered. It is either *waiting*
(an index peek whose dataflow's upper is not yet beyond its timestamp) or *running* (handed to
the driver, which reports ``PeekFinished``). :class:`PendingPeeks` removes a peek when it is
answered, so a peek can never be answered twice: an answer is only produced by taking the peek
out of the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from spate.compute.replica.records import DataflowRecord
from spate.compute.replica.subscribe import result_too_large
from spate.errors import Problem
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, PeekId
from spate.protocol.compute import Peek, PeekError, PeekResponse, PeekRows


def read_before_since(id: GlobalId, since: Frontier, timestamp: int) -> str:
    """The answer to a peek below an arrangement's compaction frontier."""
    return (
        f"arrangement {id}: compaction frontier {since} is beyond the time of the attempted "
        f"read ({timestamp})"
    )


def peek_error(uuid: PeekId, problem: Problem | str) -> PeekResponse:
    """The error answer to peek ``uuid``: ``problem``'s message and SQLSTATE (a bare message
    has none)."""
    if isinstance(problem, str):
        problem = Problem(problem)
    return PeekResponse(uuid, PeekError(problem.message, problem.sqlstate, problem.pg_message))


def peek_answer(
    uuid: PeekId,
    rows: pa.Table | None,
    error: Problem | None,
    *,
    max_result_size: int | None,
) -> PeekResponse:
    """The response for a finished peek: its rows, its error, or the result-size error."""
    if error is not None or rows is None:
        return peek_error(uuid, error or Problem("the peek produced no result"))
    size = rows.nbytes
    if max_result_size is not None and size > max_result_size:
        return peek_error(uuid, result_too_large(size, max_result_size))
    return PeekResponse(uuid, PeekRows(rows))


def index_peek_problem(
    peek: Peek, df: DataflowRecord | None, indexes: Callable[[], list[GlobalId]]
) -> Problem | str | None:
    """Why an index peek must be answered with an error at once (``None``: it may wait or run).

    ``df`` is the dataflow exporting the peeked id (``None``: nothing does); ``indexes`` lists
    this replica's indexes, for the message.
    """
    id = peek.target.id
    if df is None or df.exports[id].kind != "index":
        known = ", ".join(str(i) for i in indexes()) or "none"
        return f"collection {id} is not an index here; indexes: {known}"
    if df.status == "failed":
        return (df.error or Problem("")).within(f"collection {id} failed: ")
    since = df.since(df.exports[id])
    if not since.less_equal(peek.timestamp):
        return read_before_since(id, since, peek.timestamp)
    return None


def runnable(df: DataflowRecord, p: PendingPeek) -> bool:
    """The index is built and its upper is beyond the peek's timestamp."""
    return df.status == "ready" and not df.upper.less_equal(p.peek.timestamp)


@dataclass
class PendingPeek:
    epoch: int
    peek: Peek
    key: int | None
    """The dataflow whose index the peek reads (``None``: a persist peek)."""
    running: bool = False

    @property
    def target(self) -> GlobalId:
        return self.peek.target.id


class PendingPeeks:
    """The peeks not yet answered, by uuid."""

    __slots__ = ("_peeks",)

    def __init__(self) -> None:
        self._peeks: dict[PeekId, PendingPeek] = {}

    def __len__(self) -> int:
        return len(self._peeks)

    def __iter__(self) -> Iterator[PendingPeek]:
        return iter(list(self._peeks.values()))

    def uuids(self) -> list[PeekId]:
        return list(self._peeks)

    def get(self, uuid: PeekId) -> PendingPeek | None:
        return self._peeks.get(uuid)

    def add(self, p: PendingPeek) -> None:
        self._peeks[p.peek.uuid] = p

    def pop(self, uuid: PeekId) -> PendingPeek | None:
        return self._peeks.pop(uuid, None)

    def take_waiting(self, pred: Callable[[PendingPeek], bool]) -> list[PendingPeek]:
        """Remove and return the waiting (not running) peeks matching ``pred``."""
        out = [p for p in self._peeks.values() if not p.running and pred(p)]
        for p in out:
            del self._peeks[p.peek.uuid]
        return out

    def clear(self) -> list[PeekId]:
        """Forget every peek; return the uuids of those that were running."""
        running = [u for u, p in self._peeks.items() if p.running]
        self._peeks.clear()
        return running
