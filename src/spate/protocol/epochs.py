"""One controller per replica: the epoch gate (pure; shared by every transport).

A replica accepts a connection only from a controller epoch newer than every epoch it has
accepted before. The newer connection replaces the older one (which the transport then
closes); an epoch that is not newer is refused with :class:`~spate.protocol.errors.
EpochRefused`. Epochs strictly increase across reconnections of one controller; a
restarted controller must also out-rank its predecessor, so controllers compose the durable
controller epoch with the per-replica counter (:func:`compose_epoch`).
"""

from __future__ import annotations

from typing import Final, Generic, TypeVar

from spate.protocol.errors import EpochRefused

C = TypeVar("C")

_REPLICA_BITS: Final = 32


def compose_epoch(controller_epoch: int, replica_epoch: int) -> int:
    """One transport epoch ordering first by the controller's durable epoch, then by the
    replica incarnation: ``compose_epoch(2, 1) > compose_epoch(1, 7)``."""
    if not 0 <= controller_epoch < 2**31 or not 0 <= replica_epoch < 2**_REPLICA_BITS:
        raise ValueError(
            f"epochs out of range: controller {controller_epoch}, replica {replica_epoch}"
        )
    return (controller_epoch << _REPLICA_BITS) | replica_epoch


class EpochGate(Generic[C]):
    """Which controller epoch a replica listens to, and its current connection."""

    __slots__ = ("_connection", "_epoch")

    def __init__(self) -> None:
        self._epoch: int | None = None
        self._connection: C | None = None

    @property
    def epoch(self) -> int | None:
        """The newest epoch accepted so far (``None`` before the first)."""
        return self._epoch

    @property
    def connection(self) -> C | None:
        return self._connection

    def check(self, epoch: int, peer: str = "") -> None:
        """Raise ``EpochRefused`` unless ``epoch`` is newer than every accepted epoch."""
        if self._epoch is not None and epoch <= self._epoch:
            raise EpochRefused(epoch, self._epoch, peer)

    def admit(self, epoch: int, connection: C, peer: str = "") -> C | None:
        """Accept ``connection`` at ``epoch``; return the connection it replaces (to close)."""
        self.check(epoch, peer)
        old = self._connection
        self._epoch = epoch
        self._connection = connection
        return old

    def release(self, connection: C) -> None:
        """``connection`` ended; the epoch stays (an equal epoch is still refused)."""
        if self._connection is connection:
            self._connection = None
