"""An in-memory :class:`~spate.persist.location.Consensus` (tests and simulation)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from spate.persist._named import Named
from spate.persist.consensus import (
    CasOp,
    VersionedData,
    check_cas_ops,
    check_consensus_key,
    next_seqno,
)
from spate.persist.errors import TruncateBeyondHead


class MemConsensus:
    """Per-key lists of entries behind one lock. ``MemConsensus.named(n)``: one per process."""

    def __init__(self) -> None:
        self._logs: dict[str, list[VersionedData]] = {}
        self._lock = threading.Lock()
        self.commits = 0
        """Batched compare-and-sets done (each under one hold of the lock)."""

    @staticmethod
    def named(name: str) -> MemConsensus:
        """The process-wide store called ``name`` (created empty on first use)."""
        return _NAMED.get(name)

    def head(self, key: str) -> VersionedData | None:
        check_consensus_key(key)
        with self._lock:
            log = self._logs.get(key)
            return log[-1] if log else None

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        check_consensus_key(key)
        with self._lock:
            log = self._logs.setdefault(key, [])
            current = log[-1].seqno if log else None
            if current != expected:
                return False
            log.append(VersionedData(next_seqno(expected), bytes(data)))
            return True

    def compare_and_set_many(self, ops: Sequence[CasOp]) -> list[bool]:
        ops = check_cas_ops(ops)
        out = []
        with self._lock:
            for op in ops:
                log = self._logs.setdefault(op.key, [])
                current = log[-1].seqno if log else None
                ok = current == op.expected
                if ok:
                    log.append(VersionedData(next_seqno(op.expected), bytes(op.data)))
                out.append(ok)
            if ops:
                self.commits += 1
        return out

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        check_consensus_key(key)
        with self._lock:
            log = self._logs.get(key, [])
            return [e for e in log if e.seqno >= from_seqno][:limit]

    def truncate(self, key: str, seqno: int) -> int:
        check_consensus_key(key)
        with self._lock:
            log = self._logs.get(key, [])
            head = log[-1].seqno if log else None
            if head is None or seqno > head:
                raise TruncateBeyondHead(key, seqno, head)
            keep = [e for e in log if e.seqno >= seqno]
            self._logs[key] = keep
            return len(log) - len(keep)

    def list_keys(self) -> list[str]:
        with self._lock:
            return sorted(k for k, v in self._logs.items() if v)

    def close(self) -> None:
        pass


_NAMED: Named[MemConsensus] = Named(MemConsensus)
