"""Seeded unreliable wrappers around a Blob or a Consensus (fault tests).

Each operation independently, with the configured probabilities:

* **fail** — raise :class:`~spate.errors.Determinate` without doing anything;
* **timeout before** — raise :class:`~spate.errors.Indeterminate` without doing anything;
* **did it, then timed out** — do the operation, then raise ``Indeterminate``.

Reads that "did it" are just lost answers. The random choices come from one seeded
``random.Random``, so a failing run replays from its seed. ``enabled = False`` turns the faults
off (to check the end state reliably).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from spate.errors import Determinate, Indeterminate
from spate.persist.blob import Blob
from spate.persist.consensus import CasOp, Consensus, VersionedData

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Faults:
    """Probabilities of each fault per operation (their sum must be at most 1)."""

    fail: float = 0.05
    timeout_before: float = 0.05
    timeout_after: float = 0.05

    def __post_init__(self) -> None:
        ps = (self.fail, self.timeout_before, self.timeout_after)
        if any(p < 0 for p in ps) or sum(ps) > 1:
            raise ValueError(f"fault probabilities must be >= 0 and sum to <= 1, got {ps}")


class _Injector:
    def __init__(self, rng: random.Random, faults: Faults) -> None:
        self._rng = rng
        self.faults = faults
        self.enabled = True
        self._lock = threading.Lock()
        self.counts = {"ok": 0, "fail": 0, "timeout_before": 0, "timeout_after": 0}

    def run(self, what: str, op: Callable[[], T]) -> T:
        with self._lock:
            x = self._rng.random() if self.enabled else 1.0
        f = self.faults
        if x < f.fail:
            self.counts["fail"] += 1
            raise Determinate(f"unreliable: {what} failed (injected)")
        if x < f.fail + f.timeout_before:
            self.counts["timeout_before"] += 1
            raise Indeterminate(f"unreliable: {what} timed out before running (injected)")
        result = op()
        if x < f.fail + f.timeout_before + f.timeout_after:
            self.counts["timeout_after"] += 1
            raise Indeterminate(f"unreliable: {what} ran, then timed out (injected)")
        self.counts["ok"] += 1
        return result


class _Unreliable:
    """The switch and the counters shared by both wrappers."""

    def __init__(self, rng: random.Random, faults: Faults | None) -> None:
        self._inj = _Injector(rng, faults or Faults())

    @property
    def enabled(self) -> bool:
        return self._inj.enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        self._inj.enabled = value

    @property
    def counts(self) -> dict[str, int]:
        """How many operations ran fine and how many got each fault."""
        return dict(self._inj.counts)


class UnreliableBlob(_Unreliable):
    """``inner`` with injected faults (see the module docs)."""

    def __init__(self, inner: Blob, rng: random.Random, faults: Faults | None = None) -> None:
        super().__init__(rng, faults)
        self.inner = inner

    def get(self, key: str) -> bytes | None:
        return self._inj.run(f"blob get {key}", lambda: self.inner.get(key))

    def set(self, key: str, value: bytes) -> None:
        self._inj.run(f"blob set {key}", lambda: self.inner.set(key, value))

    def delete(self, key: str) -> int | None:
        return self._inj.run(f"blob delete {key}", lambda: self.inner.delete(key))

    def list_keys(self, prefix: str) -> Iterator[tuple[str, int]]:
        items = self._inj.run(f"blob list {prefix}", lambda: list(self.inner.list_keys(prefix)))
        return iter(items)

    def local_path(self, key: str) -> str | None:
        return self.inner.local_path(key)

    def close(self) -> None:
        self.inner.close()


class UnreliableConsensus(_Unreliable):
    """``inner`` with injected faults (see the module docs)."""

    def __init__(self, inner: Consensus, rng: random.Random, faults: Faults | None = None) -> None:
        super().__init__(rng, faults)
        self.inner = inner

    def head(self, key: str) -> VersionedData | None:
        return self._inj.run(f"consensus head {key}", lambda: self.inner.head(key))

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        return self._inj.run(
            f"consensus cas {key}", lambda: self.inner.compare_and_set(key, expected, data)
        )

    def compare_and_set_many(self, ops: Sequence[CasOp]) -> list[bool]:
        """One fault draw for the whole batch: it runs whole or not at all (one transaction)."""
        return self._inj.run(
            f"consensus cas {len(ops)} keys", lambda: self.inner.compare_and_set_many(ops)
        )

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        return self._inj.run(
            f"consensus scan {key}", lambda: self.inner.scan(key, from_seqno, limit)
        )

    def truncate(self, key: str, seqno: int) -> int:
        return self._inj.run(f"consensus truncate {key}", lambda: self.inner.truncate(key, seqno))

    def list_keys(self) -> list[str]:
        return self._inj.run("consensus list", self.inner.list_keys)

    def close(self) -> None:
        self.inner.close()
