"""Counted times: ``ChangeBatch`` and ``MutableAntichain``.

A ``ChangeBatch`` is a consolidated bag of ``(time, delta)``: equal times are summed and zero
deltas vanish. Read holds ship their movements as change batches (``+1 @ new, -1 @ old``).

A ``MutableAntichain`` is a multiset of times with integer counts. Its ``frontier()`` is the set
of minimal times whose count is positive. ``update_iter`` applies deltas and returns the change
of the frontier itself as a change batch (``-1`` for times that left it, ``+1`` for times that
entered it): applying that batch to the old frontier gives the new one. The ``since`` of every
collection is the frontier of a ``MutableAntichain`` of read capabilities.

Invariants (violations raise, and the call changes nothing):

* no count ever goes negative (``NegativeCount``);
* no positive count is added at a time not beyond the current frontier
  (``FrontierRegression``): a capability cannot be recovered once released.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic

from spate.errors import FrontierRegression, NegativeCount
from spate.frontier.antichain import Antichain, Product, T, _sort_key


class ChangeBatch(Generic[T]):
    """A consolidated, mutable bag of ``(time, delta)`` pairs."""

    __slots__ = ("_counts",)

    def __init__(self, changes: Iterable[tuple[T, int]] = ()) -> None:
        self._counts: dict[T, int] = {}
        self.extend(changes)

    @staticmethod
    def single(time: T, delta: int) -> ChangeBatch[T]:
        batch: ChangeBatch[T] = ChangeBatch()
        batch.update(time, delta)
        return batch

    def update(self, time: T, delta: int) -> None:
        if delta == 0:
            return
        total = self._counts.get(time, 0) + delta
        if total == 0:
            del self._counts[time]
        else:
            self._counts[time] = total

    def extend(self, changes: Iterable[tuple[T, int]]) -> None:
        for time, delta in changes:
            self.update(time, delta)

    def is_empty(self) -> bool:
        return not self._counts

    def drain(self) -> list[tuple[T, int]]:
        """All changes in time order; the batch is empty afterwards."""
        out = self.items()
        self._counts.clear()
        return out

    def items(self) -> list[tuple[T, int]]:
        return sorted(self._counts.items(), key=lambda kv: _sort_key(kv[0]))

    def copy(self) -> ChangeBatch[T]:
        return ChangeBatch(self._counts.items())

    def __iter__(self) -> Iterator[tuple[T, int]]:
        return iter(self.items())

    def __len__(self) -> int:
        return len(self._counts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChangeBatch) and self._counts == other._counts

    def __hash__(self) -> int:  # mutable: not hashable
        raise TypeError("ChangeBatch is mutable and not hashable")

    def __repr__(self) -> str:
        body = ", ".join(f"{t}: {d:+d}" for t, d in self.items())
        return f"ChangeBatch({{{body}}})"


class MutableAntichain(Generic[T]):
    """A multiset of times whose frontier is the minimal times with positive count."""

    __slots__ = ("_closed", "_counts", "_frontier")

    def __init__(self, initial: Iterable[tuple[T, int]] = ()) -> None:
        self._counts: dict[T, int] = {}
        self._frontier: Antichain[T] = Antichain(())
        # Once the frontier has gone from non-empty to {}, nothing may be added again.
        self._closed = False
        changes = list(initial)
        if changes:
            self.update_iter(changes)

    @staticmethod
    def new_bottom(time: T) -> MutableAntichain[T]:
        """A multiset holding ``time`` once."""
        return MutableAntichain([(time, 1)])

    def frontier(self) -> Antichain[T]:
        return self._frontier

    def is_empty(self) -> bool:
        """True when no time has a positive count (the frontier is ``{}``)."""
        return not self._counts

    def count_for(self, time: T) -> int:
        return self._counts.get(time, 0)

    def counts(self) -> list[tuple[T, int]]:
        """Every time with a positive count, in time order."""
        return sorted(self._counts.items(), key=lambda kv: _sort_key(kv[0]))

    def update_iter(self, changes: Iterable[tuple[T, int]]) -> ChangeBatch[T]:
        """Apply ``changes`` atomically; return the change of the frontier.

        Raises ``NegativeCount`` if some count would drop below zero and ``FrontierRegression``
        if a positive delta lands at a time not beyond the current frontier. On error nothing is
        applied.
        """
        net: ChangeBatch[T] = ChangeBatch(changes)
        if net.is_empty():
            return ChangeBatch()
        current = self._frontier
        for time, delta in net.items():
            if delta > 0 and (self._closed or not (current.is_empty() or current.less_equal(time))):
                raise FrontierRegression(
                    f"cannot add {delta:+d} at {time}: not beyond the frontier {current}"
                )
            if self._counts.get(time, 0) + delta < 0:
                raise NegativeCount(
                    f"count at {time} would become {self._counts.get(time, 0) + delta} "
                    f"(frontier {current})"
                )
        for time, delta in net.items():
            total = self._counts.get(time, 0) + delta
            if total == 0:
                del self._counts[time]
            else:
                self._counts[time] = total
        new = self._compute_frontier()
        self._frontier = new
        if new.is_empty():
            self._closed = True
        changed: ChangeBatch[T] = ChangeBatch()
        if new != current:
            for t in current.elements:
                changed.update(t, -1)
            for t in new.elements:
                changed.update(t, 1)
        return changed

    def _compute_frontier(self) -> Antichain[T]:
        if not self._counts:
            return Antichain(())
        keys = self._counts.keys()
        first = next(iter(keys))
        if isinstance(first, Product):
            return Antichain(keys)
        return Antichain((min(keys),))

    def __repr__(self) -> str:
        body = ", ".join(f"{t}: {c}" for t, c in self.counts())
        return f"MutableAntichain(frontier={self._frontier}, counts={{{body}}})"
