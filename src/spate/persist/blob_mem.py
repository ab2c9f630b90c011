"""An in-memory :class:`~spate.persist.location.Blob` (tests and simulation)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from spate.persist._named import Named
from spate.persist.blob import check_blob_key


class MemBlob:
    """A dict of key → bytes behind a lock. ``MemBlob.named(n)`` is one store per process."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()

    @staticmethod
    def named(name: str) -> MemBlob:
        """The process-wide store called ``name`` (created empty on first use)."""
        return _NAMED.get(name)

    def get(self, key: str) -> bytes | None:
        check_blob_key(key)
        with self._lock:
            return self._data.get(key)

    def set(self, key: str, value: bytes) -> None:
        check_blob_key(key)
        with self._lock:
            self._data[key] = bytes(value)

    def delete(self, key: str) -> int | None:
        check_blob_key(key)
        with self._lock:
            old = self._data.pop(key, None)
        return None if old is None else len(old)

    def list_keys(self, prefix: str) -> Iterator[tuple[str, int]]:
        with self._lock:
            items = [(k, len(v)) for k, v in self._data.items() if k.startswith(prefix)]
        return iter(sorted(items))

    def local_path(self, key: str) -> str | None:
        return None

    def close(self) -> None:
        pass


_NAMED: Named[MemBlob] = Named(MemBlob)
