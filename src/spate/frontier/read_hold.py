"""Read holds: tokens that keep a collection readable at and beyond their since.

A ``ReadHold`` is ``(collection id, since, issuer)``. The issuer (a controller) counts every
outstanding hold in the collection's ``MutableAntichain`` of read capabilities, so the
collection's since never passes a hold. Each movement of a hold is sent to the issuer as a
``ChangeBatch``:

* creation: the issuer counts ``+1 @ since`` itself before it hands out the hold (so the hold is
  effective the moment it exists); hence only issuers construct ``ReadHold``;
* ``try_downgrade(F)``: ``{-1 @ old, +1 @ F}``; a frontier below the since is an error and
  changes nothing; the same frontier is a no-op;
* ``clone()``: ``+1 @ since`` for an independent hold;
* ``release()``: ``-1 @ since``; a released hold has since ``{}`` and releasing again is a no-op;
* ``merge_assign(other)``: same collection and issuer only; the result holds the meet of both
  sinces and ``other`` is consumed (released without further messages).

Holds are explicit: nothing relies on garbage collection (``__del__``) to release them.
Invariant (property-tested): the changes sent by any sequence of operations on a family of
holds, including their creation, sum to exactly ``+1`` at each live hold's since.
"""

from __future__ import annotations

from collections.abc import Callable

from spate.errors import ReadHoldDowngradeError, ReadHoldMismatch
from spate.frontier.antichain import Antichain, Frontier, Timestamp
from spate.frontier.mutable import ChangeBatch
from spate.ids import GlobalId

HoldChanges = Callable[[GlobalId, ChangeBatch[Timestamp]], None]
"""The issuer's channel: receives the changes of a hold on collection ``id``."""


class ReadHold:
    """A read capability on one collection. Construct only from an issuer that counted it."""

    __slots__ = ("_id", "_issuer", "_since")

    def __init__(self, id: GlobalId, since: Frontier, issuer: HoldChanges) -> None:
        self._id = id
        self._since = since
        self._issuer = issuer

    @property
    def id(self) -> GlobalId:
        return self._id

    @property
    def since(self) -> Frontier:
        return self._since

    def is_released(self) -> bool:
        return self._since.is_empty()

    def issued_by(self, issuer: HoldChanges) -> bool:
        return self._issuer == issuer

    def _send(self, changes: ChangeBatch[Timestamp]) -> None:
        if not changes.is_empty():
            self._issuer(self._id, changes)

    def try_downgrade(self, frontier: Frontier) -> None:
        """Move the hold forward to ``frontier``. Raises if ``frontier`` is below the since."""
        if not self._since.less_equal(frontier):
            raise ReadHoldDowngradeError(
                f"read hold on {self._id}: cannot downgrade to {frontier}, "
                f"which is not beyond its since {self._since}"
            )
        if frontier == self._since:
            return
        changes: ChangeBatch[Timestamp] = ChangeBatch()
        for t in self._since:
            changes.update(t, -1)
        for t in frontier:
            changes.update(t, 1)
        self._since = frontier
        self._send(changes)

    def clone(self) -> ReadHold:
        """An independent hold at the same since."""
        changes: ChangeBatch[Timestamp] = ChangeBatch((t, 1) for t in self._since)
        self._send(changes)
        return ReadHold(self._id, self._since, self._issuer)

    def release(self) -> None:
        """Give the hold up. Idempotent."""
        if self._since.is_empty():
            return
        changes: ChangeBatch[Timestamp] = ChangeBatch((t, -1) for t in self._since)
        self._since = Antichain.empty()
        self._send(changes)

    def merge_assign(self, other: ReadHold) -> None:
        """Absorb ``other``: this hold keeps the meet of both sinces; ``other`` is released."""
        if other is self:
            raise ReadHoldMismatch(f"read hold on {self._id}: cannot merge a hold into itself")
        if other._id != self._id or other._issuer != self._issuer:
            raise ReadHoldMismatch(
                f"cannot merge a read hold on {other._id} into a read hold on {self._id}: "
                "holds must share collection and issuer"
            )
        merged = self._since.meet(other._since)
        changes: ChangeBatch[Timestamp] = ChangeBatch()
        for t in self._since:
            changes.update(t, -1)
        for t in other._since:
            changes.update(t, -1)
        for t in merged:
            changes.update(t, 1)
        self._since = merged
        other._since = Antichain.empty()
        self._send(changes)

    def __repr__(self) -> str:
        return f"ReadHold({self._id}, since={self._since})"
