"""Process-wide named instances (``mem://name`` stores)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Named(Generic[T]):
    """One instance per name, made on first use, shared by everyone in the process."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> T:
        with self._lock:
            found = self._items.get(name)
            if found is None:
                found = self._items[name] = self._make()
            return found
