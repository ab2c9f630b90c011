"""Cancelling an evaluation in progress: a thread's evaluations stop, with
:class:`~spate.errors.QueryCanceled`, soon after the event it runs under is set.

The evaluator (:mod:`.relation`) runs in plain Python on the caller's thread; a server runs
each statement on a worker thread and answers a cancel request (or a statement timeout) at
once, but the worker would go on computing. So the caller names an event for the thread
(:func:`interruptible`), and the evaluator's row loops look at it every
:data:`EVERY` rows (:func:`checked`): a canceled statement frees its thread within moments.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from typing import Final, TypeVar

from spate.errors import QueryCanceled

T = TypeVar("T")

EVERY: Final = 1024
"""Rows between two looks at the event."""

_local = threading.local()


@contextlib.contextmanager
def interruptible(event: threading.Event) -> Iterator[None]:
    """Evaluations on this thread, in the block, stop once ``event`` is set."""
    before = getattr(_local, "event", None)
    _local.event = event
    try:
        yield
    finally:
        _local.event = before


def check() -> None:
    """Raise :class:`QueryCanceled` if this thread's evaluation was canceled."""
    event = getattr(_local, "event", None)
    if event is not None and event.is_set():
        raise QueryCanceled("the evaluation was canceled")


def checked(items: Iterable[T]) -> Iterable[T]:
    """``items``, looking at this thread's event every :data:`EVERY` of them (``items``
    itself when nothing can cancel the thread's evaluation)."""
    event = getattr(_local, "event", None)
    if event is None:
        return items
    return _checked(items, event)


def _checked(items: Iterable[T], event: threading.Event) -> Iterator[T]:
    n = 0
    for item in items:
        n += 1
        if n >= EVERY:
            n = 0
            if event.is_set():
                raise QueryCanceled("the evaluation was canceled")
        yield item
