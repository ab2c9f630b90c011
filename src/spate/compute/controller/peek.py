"""Pending peeks of an instance.

A peek holds a read hold on its target at ``{timestamp}`` from the moment it is issued until it
is finished, so no replica can be asked to read compacted data. Finishing a peek — by the first
eligible response, by ``cancel_peek``, or by the failure of its target replica — always does,
in this order:

1. deliver the :class:`PeekNotification` and the peek's result to the caller (exactly once);
2. send ``CancelPeek(uuid)`` to every replica (so replicas that have not answered stop, and the
   history can forget the peek);
3. release the read hold — after the ``CancelPeek``, so on every connection the replica sees
   the cancellation before any ``AllowCompaction`` the release may cause.

A response is *eligible* if the peek is still pending and either has no target replica or came
from it; every other response is ignored (the peek was already answered elsewhere).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from spate.compute.controller.actions import Effects
from spate.compute.controller.errors import (
    ERROR_TARGET_REPLICA_FAILED,
)
from spate.compute.controller.responses import (
    PeekNotification,
    PeekOutcome,
    PeekResult,
    PeekWasCanceled,
    outcome_of,
)
from spate.frontier.read_hold import ReadHold
from spate.ids import GlobalId, InstanceId, PeekId, ReplicaId
from spate.protocol.compute import (
    CancelPeek,
    PeekError,
)

if TYPE_CHECKING:
    pass

_log: Final = logging.getLogger("spate.compute.controller.peek")


@dataclass(slots=True, eq=False)
class PendingPeek:
    uuid: PeekId
    target: GlobalId
    timestamp: int
    target_replica: ReplicaId | None
    read_hold: ReadHold
    requested_at_ms: int


class PeekTracker:
    """The pending peeks of one instance."""

    __slots__ = ("_effects", "_instance", "_pending")

    def __init__(self, instance: InstanceId, effects: Effects) -> None:
        self._instance = instance
        self._effects = effects
        self._pending: dict[PeekId, PendingPeek] = {}

    def __contains__(self, uuid: PeekId) -> bool:
        return uuid in self._pending

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[PendingPeek]:
        return iter(list(self._pending.values()))

    def get(self, uuid: PeekId) -> PendingPeek | None:
        return self._pending.get(uuid)

    def add(self, peek: PendingPeek) -> None:
        self._pending[peek.uuid] = peek

    def on_response(self, replica: ReplicaId, uuid: PeekId, result: PeekResult) -> None:
        """A replica answered ``uuid``; the first eligible answer finishes the peek."""
        peek = self._pending.get(uuid)
        if peek is None:
            return
        if peek.target_replica is not None and peek.target_replica != replica:
            return
        self.finish(uuid, result, outcome_of(result))

    def cancel(self, uuid: PeekId, reason: PeekResult) -> None:
        """Cancel ``uuid`` on the caller's behalf: ``reason`` is what the caller receives."""
        if uuid not in self._pending:
            _log.warning("cancel of unknown peek %s on instance %s ignored", uuid, self._instance)
            return
        self.finish(uuid, reason, PeekWasCanceled())

    def fail_targeting(self, replica: ReplicaId) -> None:
        """Finish every peek that only ``replica`` may answer: it failed or was dropped."""
        for peek in list(self._pending.values()):
            if peek.target_replica == replica:
                result = PeekError(ERROR_TARGET_REPLICA_FAILED)
                self.finish(peek.uuid, result, outcome_of(result))

    def cancel_all(self, message: str) -> None:
        for peek in list(self._pending.values()):
            result = PeekError(message)
            self.finish(peek.uuid, result, outcome_of(result))

    def finish(self, uuid: PeekId, result: PeekResult, outcome: PeekOutcome) -> None:
        peek = self._pending.pop(uuid)
        self._effects.deliver(PeekNotification(self._instance, uuid, outcome))
        self._effects.deliver_peek(uuid, result)
        self._effects.broadcast(CancelPeek(uuid))
        peek.read_hold.release()
