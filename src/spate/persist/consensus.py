"""Consensus: a linearizable log of ``(seqno, data)`` per key, where persist keeps shard state.

``compare_and_set(key, expected, data)`` appends ``data`` at seqno ``expected + 1`` (``0`` when
``expected`` is ``None``) if and only if the latest entry has seqno ``expected`` (or the key has
no entry when ``expected`` is ``None``). ``truncate(key, seqno)`` deletes the entries below
``seqno``; the head is never deleted. :mod:`spate.persist.location` opens an implementation by
URI; every implementation passes ``tests/conformance/test_consensus.py``.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Final, Protocol

from spate.persist.errors import InvalidKey

MAX_CONSENSUS_KEY_LEN: Final = 512


def check_consensus_key(key: str) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_CONSENSUS_KEY_LEN:
        raise InvalidKey(f"invalid consensus key {key!r}")
    return key


@dataclass(frozen=True, slots=True)
class VersionedData:
    """One consensus entry."""

    seqno: int
    data: bytes


class Consensus(Protocol):
    """A linearizable log of ``(seqno, data)`` per key (see the module docs).

    ``compare_and_set`` returns ``True`` if it appended, ``False`` if the expectation did not
    hold. It MUST be atomic and linearizable with every other operation on the key, across
    processes. ``scan(key, from_seqno, limit)`` returns entries with ``seqno >= from_seqno`` in
    ascending order. ``truncate(key, seqno)`` deletes entries below ``seqno`` and returns how
    many it deleted; ``seqno`` beyond the head raises ``TruncateBeyondHead``.
    """

    def head(self, key: str) -> VersionedData | None: ...

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool: ...

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]: ...

    def truncate(self, key: str, seqno: int) -> int: ...

    def list_keys(self) -> list[str]: ...

    def close(self) -> None: ...


def next_seqno(expected: int | None) -> int:
    """The seqno a successful ``compare_and_set(expected=...)`` writes."""
    return 0 if expected is None else expected + 1


def redact_uri(uri: str) -> str:
    """``uri`` with any password replaced by ``***`` (for ``str`` and logs)."""
    try:
        parts = urllib.parse.urlsplit(uri)
    except ValueError:
        return "<unparseable uri>"
    if parts.password is None:
        return uri
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))
