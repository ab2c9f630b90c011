"""A consensus test double's base: every call passes through to ``inner``; a double overrides
what it changes. (No ``compare_and_set_many``: batches go through ``compare_and_set`` one by
one, so a double sees each.)"""

from __future__ import annotations

from spate.persist.consensus import Consensus, VersionedData


class PassThroughConsensus:
    def __init__(self, inner: Consensus) -> None:
        self.inner = inner

    def head(self, key: str) -> VersionedData | None:
        return self.inner.head(key)

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        return self.inner.compare_and_set(key, expected, data)

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        return self.inner.scan(key, from_seqno, limit)

    def truncate(self, key: str, seqno: int) -> int:
        return self.inner.truncate(key, seqno)

    def list_keys(self) -> list[str]:
        return self.inner.list_keys()

    def close(self) -> None:
        self.inner.close()
