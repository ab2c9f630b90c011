"""Checking a compute replica's responses against its obligations, as they arrive.

:class:`ResponseChecker` is pure: it is told every command sent on one connection
(:meth:`~ResponseChecker.sent`) and every response received (:meth:`~ResponseChecker.received`),
keeps what it saw in :class:`Observed`, and collects broken obligations in ``violations``:

* frontiers and subscribe responses only for exports created on this connection;
* frontiers of each kind never regress, the first one is ``>=`` the export's as_of, and nothing
  follows ``{}``;
* at most one ``PeekResponse`` per peek uuid, and only for peeks sent on the connection;
* subscribe batches are contiguous, non-empty intervals starting at ``{0}``, their updates'
  times lie within them, and nothing follows a final batch or ``DroppedAt``.

Used by the test driver (:mod:`spate.testing.replica_driver`) and by property tests of the
replica state machine.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow.compute as pc

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, PeekId
from spate.protocol.compute import (
    CreateDataflow,
    Frontiers,
    Peek,
    PeekResponse,
    Status,
    SubscribeBatch,
    SubscribeDroppedAt,
    SubscribeResponse,
)
from spate.repr.desc import TIME_COLUMN


@dataclass
class _Kinds:
    write: Frontier | None = None
    input: Frontier | None = None
    output: Frontier | None = None


@dataclass
class Observed:
    """Everything a driver received."""

    frontiers: dict[GlobalId, _Kinds] = field(default_factory=lambda: defaultdict(_Kinds))
    frontier_log: list[Frontiers] = field(default_factory=list)
    peeks: dict[PeekId, PeekResponse] = field(default_factory=dict)
    peek_received: dict[PeekId, float] = field(default_factory=dict)
    """When each peek's answer arrived (the ``at`` given to ``received``)."""
    subscribes: dict[GlobalId, list[SubscribeBatch | SubscribeDroppedAt]] = field(
        default_factory=lambda: defaultdict(list)
    )
    statuses: list[Status] = field(default_factory=list)


class ResponseChecker:
    """The obligations of one connection's responses (module docs)."""

    def __init__(self) -> None:
        self.observed = Observed()
        self.violations: list[str] = []
        self._sent_peeks: set[PeekId] = set()
        self._as_of: dict[GlobalId, Frontier] = {}

    def sent(self, command: object) -> None:
        if isinstance(command, Peek):
            self._sent_peeks.add(command.uuid)
        elif isinstance(command, CreateDataflow) and command.dataflow.as_of is not None:
            for id in command.dataflow.export_ids():
                self._as_of[id] = command.dataflow.as_of

    def received(self, msg: object, *, at: float = 0.0) -> None:
        self._record(msg, at)

    def _violation(self, text: str) -> None:
        self.violations.append(text)

    def _record(self, msg: object, at: float) -> None:
        obs = self.observed
        if isinstance(msg, (Frontiers, SubscribeResponse)) and msg.id not in self._as_of:
            self._violation(f"{msg.id}: {type(msg).__name__} for an export not created here")
        if isinstance(msg, Frontiers):
            obs.frontier_log.append(msg)
            kinds = obs.frontiers[msg.id]
            for kind in ("write", "input", "output"):
                new = getattr(msg, f"{kind}_frontier")
                if new is None:
                    continue
                old = getattr(kinds, kind)
                if old is not None and not old.less_than(new):
                    self._violation(f"{msg.id}: {kind} frontier {new} after {old}")
                as_of = self._as_of.get(msg.id)
                if old is None and as_of is not None and not as_of.less_equal(new):
                    self._violation(f"{msg.id}: first {kind} frontier {new} before as_of {as_of}")
                setattr(kinds, kind, new)
        elif isinstance(msg, PeekResponse):
            if msg.uuid in obs.peeks:
                self._violation(f"second response to peek {msg.uuid}")
            elif msg.uuid not in self._sent_peeks:
                self._violation(f"response to unknown peek {msg.uuid}")
            obs.peeks[msg.uuid] = msg
            obs.peek_received[msg.uuid] = at
        elif isinstance(msg, SubscribeResponse):
            self._check_subscribe(msg)
            obs.subscribes[msg.id].append(msg.response)
        elif isinstance(msg, Status):
            obs.statuses.append(msg)

    def _check_subscribe(self, msg: SubscribeResponse) -> None:
        previous = self.observed.subscribes[msg.id]
        last = previous[-1] if previous else None
        if isinstance(last, SubscribeDroppedAt) or (
            isinstance(last, SubscribeBatch) and last.upper.is_empty()
        ):
            self._violation(f"subscribe {msg.id}: response after the end")
            return
        b = msg.response
        if not isinstance(b, SubscribeBatch):
            return
        expected = last.upper if isinstance(last, SubscribeBatch) else Antichain.minimum()
        if b.lower != expected or not b.lower.less_than(b.upper):
            self._violation(f"subscribe {msg.id}: batch [{b.lower}, {b.upper}) after {expected}")
        if b.updates is not None and b.updates.num_rows:
            times = b.updates.column(TIME_COLUMN)
            lo, hi = pc.min(times).as_py(), pc.max(times).as_py()
            if not b.lower.less_equal(lo) or b.upper.less_equal(hi):
                self._violation(
                    f"subscribe {msg.id}: times [{lo}, {hi}] outside [{b.lower}, {b.upper})"
                )
