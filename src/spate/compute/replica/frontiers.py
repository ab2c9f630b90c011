"""Frontier reporting that never regresses.

A replica reports three frontiers per index or materialized-view export (write, input,
output). For each kind, a :class:`FrontierReporter` decides whether a new value may be sent:

* before the first report (``NotReported``, with a lower bound — the export's ``as_of``, or
  after a reconciliation the new ``as_of``), a value ``f`` may be reported iff ``lower <= f``;
* after a report of ``r``, a value ``f`` may be reported iff ``r < f`` (strictly later);
* after ``{}`` was reported, nothing more is ever reported for that kind.

So the first report is ``>= as_of``, reports of one kind strictly increase, and ``{}`` is
final — the obligations of ``Frontiers``. :meth:`FrontierReporter.mark_reported_empty` puts a
reporter into the final state without sending anything (collections dropped during
reconciliation must produce no spurious empty-frontier report).
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.protocol.compute import Frontiers


class FrontierReporter:
    """The reporting state of one frontier kind of one export (module docs)."""

    __slots__ = ("_lower", "_reported")

    def __init__(self, lower: Frontier) -> None:
        self._lower = lower
        self._reported: Frontier | None = None

    @property
    def reported(self) -> Frontier | None:
        """The last value reported (``None``: nothing yet)."""
        return self._reported

    @property
    def done(self) -> bool:
        """``{}`` was reported (or marked): nothing more will be."""
        return self._reported is not None and self._reported.is_empty()

    def allows(self, frontier: Frontier) -> bool:
        if self._reported is None:
            return self._lower.less_equal(frontier)
        return self._reported.less_than(frontier)

    def offer(self, frontier: Frontier) -> Frontier | None:
        """``frontier`` if it may be reported now (and remember it), else ``None``."""
        if not self.allows(frontier):
            return None
        self._reported = frontier
        return frontier

    def reset(self, lower: Frontier) -> None:
        """Forget the reports: the next one must be ``>= lower`` (a new protocol iteration)."""
        self._lower = lower
        self._reported = None

    def mark_reported_empty(self) -> None:
        """Behave as if ``{}`` had been reported (send nothing, ever)."""
        self._reported = Antichain.empty()


@dataclass
class ExportReports:
    """The write, input and output reporters of one export."""

    id: GlobalId
    write: FrontierReporter
    input: FrontierReporter
    output: FrontierReporter

    @classmethod
    def starting_at(cls, id: GlobalId, lower: Frontier) -> ExportReports:
        return cls(id, FrontierReporter(lower), FrontierReporter(lower), FrontierReporter(lower))

    def reset(self, lower: Frontier) -> None:
        for r in (self.write, self.input, self.output):
            r.reset(lower)

    def mark_reported_empty(self) -> None:
        for r in (self.write, self.input, self.output):
            r.mark_reported_empty()

    @property
    def done(self) -> bool:
        return self.write.done and self.input.done and self.output.done

    def offer(
        self,
        *,
        write: Frontier | None = None,
        input: Frontier | None = None,
        output: Frontier | None = None,
    ) -> Frontiers | None:
        """The ``Frontiers`` response for the kinds that may be reported, or ``None``."""
        w = self.write.offer(write) if write is not None else None
        i = self.input.offer(input) if input is not None else None
        o = self.output.offer(output) if output is not None else None
        if w is None and i is None and o is None:
            return None
        return Frontiers(self.id, write_frontier=w, input_frontier=i, output_frontier=o)

    def offer_all(self, frontier: Frontier) -> Frontiers | None:
        return self.offer(write=frontier, input=frontier, output=frontier)

    def drop(self) -> Frontiers | None:
        """Report ``{}`` for every kind not already ``{}``."""
        return self.offer_all(Antichain.empty())
