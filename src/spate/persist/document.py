"""A small durable document in consensus: read the head, change it, compare-and-set it back.

The environment (epoch, timestamp oracle, catalog) and the storage controller (its metadata)
keep their state as single consensus keys, each a sequence of msgpack-encoded versions. A
change is ``update(fn)``: load the head, compute the new value with ``fn`` (pure), and
compare-and-set it at the next seqno; if someone else committed in between, reload and try
again. Old versions are truncated so the key stays small.

Nothing is committed that would not decode: every new value is encoded, decoded back and
compared with itself first (:class:`UndecodableValue` otherwise), so one wrongly typed value can
never make the document unreadable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Generic, TypeVar

from spate.codec import decode, encode
from spate.errors import Determinate, ProtocolError, SpateError, UsageError
from spate.persist.consensus import Consensus

T = TypeVar("T")

_KEEP_VERSIONS: Final = 10
_MAX_ATTEMPTS: Final = 100


class UndecodableValue(UsageError, ValueError):
    """A new value that would not decode as its document's type once stored (a field of the
    wrong type somewhere inside it); nothing was committed."""


class UnreadableDocument(SpateError, ValueError):
    """A stored version that does not decode: the consensus database is damaged, or was
    written by an incompatible version of spate. Names the key and the version."""


def checked_encode(key: str, value: object, cls: type) -> bytes:
    """``value`` encoded for consensus key ``key``, once it is proven to decode back to itself
    as a ``cls`` (:class:`UndecodableValue` otherwise)."""
    try:
        data = encode(value)
        back: object = decode(data, cls)
    except (ProtocolError, TypeError, ValueError, OverflowError) as e:
        raise UndecodableValue(
            f"refusing to store {key}: the new value would not read back: {e}"
        ) from None
    if back != value:
        raise UndecodableValue(f"refusing to store {key}: the new value reads back differently")
    return data


class DurableDocument(Generic[T]):
    """The value of consensus key ``key``, typed ``cls`` (a ``@wire`` type), with CaS updates.
    ``decoder`` (default: decode as ``cls``) reads a stored version."""

    def __init__(
        self,
        consensus: Consensus,
        key: str,
        cls: type[T],
        *,
        decoder: Callable[[bytes], T] | None = None,
    ) -> None:
        self._consensus = consensus
        self._key = key
        self._cls = cls
        self._decoder = decoder
        self._seqno: int | None = None
        self._value: T | None = None

    @property
    def key(self) -> str:
        return self._key

    def load(self) -> T | None:
        """The latest committed value (``None`` if the key was never written)."""
        head = self._consensus.head(self._key)
        if head is None:
            self._seqno, self._value = None, None
            return None
        if self._decoder is not None:
            value = self._decoder(head.data)
        else:
            try:
                value = decode(head.data, self._cls)
            except ProtocolError as e:
                raise UnreadableDocument(
                    f"consensus key {self._key} (version {head.seqno}) cannot be read as "
                    f"{self._cls.__name__}: {e}; the consensus database is damaged or was "
                    "written by an incompatible version of spate"
                ) from None
        self._seqno, self._value = head.seqno, value
        return self._value

    def _encode(self, value: T) -> bytes:
        return checked_encode(self._key, value, self._cls)

    def update(self, fn: Callable[[T | None], T]) -> T:
        """Commit ``fn(current)``; retried on contention. ``fn`` must be pure."""
        for _ in range(_MAX_ATTEMPTS):
            current = self.load()
            new = fn(current)
            if self._consensus.compare_and_set(self._key, self._seqno, self._encode(new)):
                self._seqno = 0 if self._seqno is None else self._seqno + 1
                self._value = new
                if self._seqno >= _KEEP_VERSIONS and self._seqno % _KEEP_VERSIONS == 0:
                    self._consensus.truncate(self._key, self._seqno - _KEEP_VERSIONS + 1)
                return new
        raise Determinate(f"consensus key {self._key}: gave up after {_MAX_ATTEMPTS} contended CaS")

    def compare_and_set(self, expected: T | None, new: T) -> bool:
        """Commit ``new`` only if the committed value is still ``expected`` (as last loaded)."""
        if self._value != expected:
            return False
        if not self._consensus.compare_and_set(self._key, self._seqno, self._encode(new)):
            self.load()
            return False
        self._seqno = 0 if self._seqno is None else self._seqno + 1
        self._value = new
        return True
