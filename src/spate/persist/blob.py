"""Blob: a store of write-once keys, where persist keeps batch data.

A key is set once to its final bytes and never modified (a retried ``set`` of the same key writes
the same bytes). Blob need not be linearizable. :mod:`spate.persist.location` opens an
implementation by URI; every implementation passes ``tests/conformance/test_blob.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, Protocol

from spate.persist.errors import InvalidKey

_BLOB_KEY: Final = re.compile(r"[A-Za-z0-9._\-]+(/[A-Za-z0-9._\-]+)*")
MAX_KEY_LEN: Final = 512


def check_blob_key(key: str) -> str:
    """Return ``key`` if it is a valid blob key, else raise :class:`InvalidKey`.

    Keys are ``/``-separated segments of ``[A-Za-z0-9._-]``; no empty, ``.`` or ``..`` segment,
    no segment starting with ``.`` (reserved for temporary files).
    """
    if (
        not isinstance(key, str)
        or len(key) > MAX_KEY_LEN
        or not _BLOB_KEY.fullmatch(key)
        or any(seg.startswith(".") for seg in key.split("/"))
    ):
        raise InvalidKey(f"invalid blob key {key!r}")
    return key


class Blob(Protocol):
    """Write-once key → bytes.

    Obligations: ``set`` MUST be atomic (a reader sees nothing or the whole value, never a
    prefix) and durable once it returns. ``get`` of an absent key returns ``None``. ``delete`` of
    an absent key is not an error. ``list_keys`` MUST list every key set before the call
    started (and not deleted since).
    """

    def get(self, key: str) -> bytes | None: ...

    def set(self, key: str, value: bytes) -> None: ...

    def delete(self, key: str) -> int | None:
        """Delete ``key``; return its size, or ``None`` if it was absent."""
        ...

    def list_keys(self, prefix: str) -> Iterator[tuple[str, int]]:
        """``(key, size)`` of every key starting with ``prefix``."""
        ...

    def local_path(self, key: str) -> str | None:
        """An absolute local filesystem path holding ``key``'s bytes, or ``None``."""
        ...

    def close(self) -> None: ...
