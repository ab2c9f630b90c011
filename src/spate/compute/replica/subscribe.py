"""Subscribe batching: turn a dataflow's per-step sink output into ``SubscribeResponse``s.

A subscribe export of a dataflow with ``as_of = a`` receives, after each step of the dataflow
from upper ``l`` to upper ``u``, the sink's consolidated updates with times in ``[l, u)`` (the
first step's updates include the snapshot at ``a``, at time ``a``). :class:`SubscribeState`
emits batches such that:

* consecutive batches are contiguous, increasing, non-empty intervals: the first one starts at
  ``{0}`` (the minimum) and each next ``lower`` is the previous ``upper``;
* updates are consolidated, every time within ``[lower, upper)`` and ``>= as_of``; without
  ``with_snapshot`` the updates at ``as_of`` (the snapshot) are left out;
* the subscribe ends at ``end = up_to ⊓ until``: once a step reaches it, the last batch has
  ``upper == {}`` and holds only updates at times before ``end``;
* a batch whose updates are larger than ``max_result_size`` becomes an error batch, which is
  final (``upper == {}``: nothing may follow an error);
* after a final batch or ``DroppedAt`` nothing more is emitted; ``DroppedAt(f)`` (on
  ``AllowCompaction({})``) carries the upper of the last batch.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import Problem
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.protocol.compute import SubscribeBatch, SubscribeDroppedAt, SubscribeResponse
from spate.repr.consolidate import consolidate
from spate.repr.desc import TIME_COLUMN


def result_too_large(size: int, limit: int) -> str:
    """The error text of a peek or subscribe batch over ``max_result_size``."""
    return f"result exceeds max size of {limit} bytes (it has {size} bytes)"


class SubscribeState:
    """Batching state of one subscribe export (module docs). Pure: no I/O."""

    __slots__ = ("_as_of", "_done", "_end", "_lower", "_with_snapshot", "id")

    def __init__(self, id: GlobalId, *, as_of: int, with_snapshot: bool, end: Frontier) -> None:
        self.id = id
        self._as_of = as_of
        self._with_snapshot = with_snapshot
        self._end = end
        self._lower: Frontier = Antichain.minimum()
        self._done = False

    @property
    def done(self) -> bool:
        """A final batch or ``DroppedAt`` was emitted (or the subscribe was silenced)."""
        return self._done

    @property
    def lower(self) -> Frontier:
        """The upper of the last batch (``{0}`` before the first)."""
        return self._lower

    def step(
        self, upper: Frontier, updates: pa.Table, *, max_result_size: int | None = None
    ) -> SubscribeResponse | None:
        """The batch for the dataflow having reached ``upper`` with ``updates`` (times below it).

        ``None`` if nothing is to be said (done already, or ``upper`` did not advance).
        """
        if self._done or not self._lower.less_than(upper):
            return None
        table = updates
        final = self._end.less_equal(upper)
        if final:
            end = self._end.as_option()
            if end is not None and table.num_rows:
                table = table.filter(pc.less(table.column(TIME_COLUMN), end))
            upper = Antichain.empty()
        if not self._with_snapshot and table.num_rows:
            table = table.filter(pc.greater(table.column(TIME_COLUMN), self._as_of))
        if table.num_rows:
            table = consolidate(table, sort=True)
        lower = self._lower
        if max_result_size is not None and table.nbytes > max_result_size:
            return self.fail(Problem(result_too_large(table.nbytes, max_result_size)))
        self._lower = upper
        self._done = final
        return SubscribeResponse(self.id, SubscribeBatch(lower, upper, table))

    def fail(self, problem: Problem) -> SubscribeResponse | None:
        """A final error batch (the subscribe cannot continue), unless already done; it
        carries ``problem``'s code and PostgreSQL text."""
        if self._done:
            return None
        self._done = True
        lower = self._lower
        self._lower = Antichain.empty()
        return SubscribeResponse(
            self.id,
            SubscribeBatch(
                lower,
                Antichain.empty(),
                None,
                error=problem.message,
                error_sqlstate=problem.sqlstate,
                error_pg_message=problem.pg_message,
            ),
        )

    def drop(self) -> SubscribeResponse | None:
        """``DroppedAt(last upper)`` for ``AllowCompaction({})``, unless already done."""
        if self._done:
            return None
        self._done = True
        return SubscribeResponse(self.id, SubscribeDroppedAt(self._lower))

    def silence(self) -> None:
        """Emit nothing more, not even ``DroppedAt`` (dropped during reconciliation)."""
        self._done = True
