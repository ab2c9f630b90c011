"""Antichains: frontiers over partially ordered times.

A frontier ``F`` is a set of mutually incomparable times. It stands for the set of times
``{t : some f in F with f <= t}``, the times *at or beyond* the frontier. For spate's
timestamps (``int`` milliseconds, a total order) a frontier is either ``{t}`` or ``{}``; the
empty frontier is the top element: no time is beyond it, so an empty ``upper`` means "closed
forever" and an empty ``since`` means "nobody may read again".

Guarantees (checked by property tests over ``int`` and over :class:`Product` times):

* elements are the minimal elements of whatever was inserted, in a canonical order, so two
  antichains holding the same set compare and hash equal;
* ``A.less_equal(B)`` (every element of ``B`` is ``>=`` some element of ``A``) is a partial order
  on frontiers with ``{}`` as top and ``{minimum}`` as bottom;
* ``meet`` (greatest lower bound: minimal elements of the union) and ``join`` (least upper bound:
  minimal elements of pairwise element joins) are commutative, associative and absorptive.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, Generic, TypeVar, overload

Timestamp = int
"""A time: milliseconds, totally ordered, with u64 semantics (never negative)."""

TIMESTAMP_MIN: Final[Timestamp] = 0
TIMESTAMP_MAX: Final[Timestamp] = 2**64 - 1


@dataclass(frozen=True, slots=True, order=False)
class Product:
    """Pair times under the product partial order: ``(a, b) <= (c, d)`` iff both coordinates are.

    spate's own collections use ``int`` times; ``Product`` exists so that the frontier algebra
    is tested against a genuinely partial order (nested scopes of differential dataflow).
    """

    outer: int
    inner: int

    def __le__(self, other: Product) -> bool:
        return self.outer <= other.outer and self.inner <= other.inner

    def __lt__(self, other: Product) -> bool:
        return self <= other and self != other

    def join(self, other: Product) -> Product:
        return Product(max(self.outer, other.outer), max(self.inner, other.inner))

    def meet(self, other: Product) -> Product:
        return Product(min(self.outer, other.outer), min(self.inner, other.inner))

    def step_back(self) -> Product:
        return Product(max(self.outer - 1, 0), max(self.inner - 1, 0))

    def __str__(self) -> str:
        return f"({self.outer}, {self.inner})"


T = TypeVar("T", int, Product)


def _le(a: T, b: T) -> bool:
    return a <= b


def elem_join(a: T, b: T) -> T:
    """Least upper bound of two times."""
    if isinstance(a, int):
        return a if a >= b else b
    assert isinstance(b, Product)
    return a.join(b)


def elem_meet(a: T, b: T) -> T:
    """Greatest lower bound of two times."""
    if isinstance(a, int):
        return a if a <= b else b
    assert isinstance(b, Product)
    return a.meet(b)


def elem_step_back(a: T) -> T:
    """The time just before ``a`` (saturating at the minimum)."""
    if isinstance(a, int):
        return a - 1 if a > TIMESTAMP_MIN else TIMESTAMP_MIN
    return a.step_back()


def _sort_key(a: int | Product) -> tuple[int, int]:
    if isinstance(a, int):
        return (a, 0)
    return (a.outer, a.inner)


def _minimal(elements: Iterable[T]) -> tuple[T, ...]:
    """The minimal elements of ``elements``, deduplicated, in canonical order."""
    items = list(elements)
    if not items:
        return ()
    first = items[0]
    if isinstance(first, int):
        return (min(items),)
    kept: list[T] = []
    for e in items:
        if any(_le(k, e) for k in kept):
            continue
        kept = [k for k in kept if not _le(e, k)]
        kept.append(e)
    kept.sort(key=_sort_key)
    return tuple(kept)


@dataclass(frozen=True, slots=True, init=False)
class Antichain(Generic[T]):
    """An immutable frontier: ``Antichain([5])``, ``Antichain.of(5)``, ``Antichain.empty()``.

    Frontiers are never truthy or falsy: write ``f.is_empty()``, never ``if f:``.
    """

    elements: tuple[T, ...]

    def __init__(self, elements: Iterable[T] = ()) -> None:
        items = tuple(elements)
        for e in items:
            if isinstance(e, bool) or not isinstance(e, (int, Product)):
                raise TypeError(f"antichain elements must be int timestamps or Product, got {e!r}")
            if isinstance(e, int) and not TIMESTAMP_MIN <= e <= TIMESTAMP_MAX:
                raise ValueError(f"timestamp {e} outside [0, 2**64)")
        if len(items) > 1:
            items = _minimal(items)
        object.__setattr__(self, "elements", items)

    # -- construction -------------------------------------------------------------------------

    @staticmethod
    def of(time: T) -> Antichain[T]:
        """The frontier ``{time}``."""
        return Antichain((time,))

    @staticmethod
    def empty() -> Antichain[int]:
        """The empty frontier ``{}`` (closed: beyond every time)."""
        return _EMPTY

    @staticmethod
    def minimum() -> Antichain[int]:
        """``{0}``: the bottom frontier, at or before every time."""
        return _MINIMUM

    # -- inspection ---------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.elements

    def as_option(self) -> T | None:
        """The single element of a totally ordered frontier, or ``None`` when empty."""
        if len(self.elements) > 1:
            raise ValueError(f"frontier {self} has more than one element")
        return self.elements[0] if self.elements else None

    def __iter__(self) -> Iterator[T]:
        return iter(self.elements)

    def __len__(self) -> int:
        return len(self.elements)

    def __bool__(self) -> bool:
        raise TypeError("a frontier has no truth value; use .is_empty()")

    def __str__(self) -> str:
        return "{" + ", ".join(str(e) for e in self.elements) + "}"

    def __repr__(self) -> str:
        return f"Antichain({self})"

    # -- order --------------------------------------------------------------------------------

    @overload
    def less_equal(self, other: Antichain[T]) -> bool: ...
    @overload
    def less_equal(self, other: T) -> bool: ...

    def less_equal(self, other: Antichain[T] | T) -> bool:
        """Against a frontier: every element of ``other`` is ``>=`` some element of ``self``.

        Against a time: some element of ``self`` is ``<= time`` (the time is at or beyond us).
        """
        if isinstance(other, Antichain):
            return all(any(_le(a, b) for a in self.elements) for b in other.elements)
        return any(_le(a, other) for a in self.elements)

    @overload
    def less_than(self, other: Antichain[T]) -> bool: ...
    @overload
    def less_than(self, other: T) -> bool: ...

    def less_than(self, other: Antichain[T] | T) -> bool:
        """Against a frontier: ``less_equal`` and unequal. Against a time: an element ``< time``."""
        if isinstance(other, Antichain):
            return self.less_equal(other) and self != other
        return any(_le(a, other) and a != other for a in self.elements)

    def meet(self, other: Antichain[T]) -> Antichain[T]:
        """Greatest lower bound (for ``int``: the minimum; ``{}`` is the identity)."""
        if not other.elements:
            return self
        if not self.elements:
            return other
        return Antichain(self.elements + other.elements)

    def join(self, other: Antichain[T]) -> Antichain[T]:
        """Least upper bound (for ``int``: the maximum; ``{}`` absorbs)."""
        if not self.elements or not other.elements:
            return Antichain(())
        return Antichain(elem_join(a, b) for a in self.elements for b in other.elements)

    def step_back(self) -> Antichain[T]:
        """Each element moved one tick back (saturating); ``{}`` stays ``{}``."""
        return Antichain(elem_step_back(e) for e in self.elements)


_EMPTY: Final[Antichain[int]] = Antichain(())
_MINIMUM: Final[Antichain[int]] = Antichain((TIMESTAMP_MIN,))

Frontier = Antichain[Timestamp]
"""A frontier over spate's timestamps: ``{t}`` or ``{}``."""


def frontier(time: Timestamp | None) -> Frontier:
    """``{time}``, or ``{}`` for ``None``: the bridge from optional ints at the system's edges."""
    return _EMPTY if time is None else Antichain((time,))
