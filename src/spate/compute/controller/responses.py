"""What the compute controller tells its caller.

``ComputeController.process()`` returns at most one :data:`ComputeControllerResponse` per call:

* :class:`PeekNotification` — a peek finished. The rows themselves go to the caller through the
  per-peek future returned by ``peek`` (a :data:`PeekResult`); the notification carries only
  how many rows and bytes there were, for bookkeeping.
* :class:`SubscribeResponse` — the next batch of a subscribe, deduplicated across replicas:
  batches of one subscribe are contiguous, ``[lower, upper)`` intervals with increasing
  uppers. After a batch with ``upper == {}`` or an ``error`` nothing more follows.
* :class:`FrontierUpper` — a collection's global write frontier advanced.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, InstanceId, PeekId
from spate.protocol.compute import PeekCanceled, PeekError, PeekRows
from spate.repr.desc import DIFF_COLUMN

PeekResult = PeekRows | PeekError | PeekCanceled
"""The answer a peek's caller receives: rows, an error, or cancellation."""


@dataclass(frozen=True, slots=True)
class PeekSuccess:
    """``rows``: rows returned (multiplicities summed, after offset/limit); ``result_size``:
    bytes of the result table."""

    rows: int
    result_size: int


@dataclass(frozen=True, slots=True)
class PeekFailed:
    message: str


@dataclass(frozen=True, slots=True)
class PeekWasCanceled:
    pass


PeekOutcome = PeekSuccess | PeekFailed | PeekWasCanceled


@dataclass(frozen=True, slots=True)
class PeekNotification:
    """Peek ``uuid`` on ``instance`` finished with ``outcome``. Exactly one per peek."""

    instance: InstanceId
    uuid: PeekId
    outcome: PeekOutcome


@dataclass(frozen=True, slots=True)
class SubscribeResponse:
    """The changes of subscribe ``id`` in ``[lower, upper)``.

    ``updates`` holds the data columns plus ``_time`` and ``_diff`` (every time in
    ``[lower, upper)``), or ``error`` says why the subscribe ended (``updates`` is ``None``)
    with its code and PostgreSQL text as the replica sent them (``None``: it has none).
    """

    instance: InstanceId
    id: GlobalId
    lower: Frontier
    upper: Frontier
    updates: pa.Table | None
    error: str | None = None
    error_sqlstate: str | None = None
    error_pg_message: str | None = None


@dataclass(frozen=True, slots=True)
class FrontierUpper:
    """The global write frontier of ``id`` advanced to ``upper``."""

    instance: InstanceId
    id: GlobalId
    upper: Frontier


ComputeControllerResponse = PeekNotification | SubscribeResponse | FrontierUpper


def outcome_of(result: PeekResult) -> PeekOutcome:
    """The notification for a peek result."""
    if isinstance(result, PeekRows):
        table = result.rows
        if DIFF_COLUMN in table.column_names:
            total = pc.sum(table.column(DIFF_COLUMN)).as_py()
            rows = int(total) if total is not None else 0
        else:
            rows = table.num_rows
        return PeekSuccess(rows=rows, result_size=int(table.nbytes))
    if isinstance(result, PeekError):
        return PeekFailed(result.message)
    return PeekWasCanceled()
