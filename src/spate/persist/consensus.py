"""Consensus: a linearizable log of ``(seqno, data)`` per key, where persist keeps shard state.

``compare_and_set(key, expected, data)`` appends ``data`` at seqno ``expected + 1`` (``0`` when
``expected`` is ``None``) if and only if the latest entry has seqno ``expected`` (or the key has
no entry when ``expected`` is ``None``). ``compare_and_set_many(ops)`` does several such
compare-and-sets on distinct keys in one transaction (one commit, one fsync): each op succeeds
or fails on its own expectation, exactly as a lone ``compare_and_set``, and the ones that
succeed become durable together. ``truncate(key, seqno)`` deletes the entries below
``seqno``; the head is never deleted. :mod:`spate.persist.location` opens an implementation by
URI; every implementation passes ``tests/conformance/test_consensus.py``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from spate.errors import Determinate, Indeterminate
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


@dataclass(frozen=True, slots=True)
class CasOp:
    """One compare-and-set of a batch: append ``data`` to ``key`` if its head is ``expected``."""

    key: str
    expected: int | None
    data: bytes


def check_cas_ops(ops: Sequence[CasOp]) -> list[CasOp]:
    """``ops`` as a list, each key checked; a key twice in one batch raises ``InvalidKey``."""
    out = list(ops)
    seen: set[str] = set()
    for op in out:
        check_consensus_key(op.key)
        if op.key in seen:
            raise InvalidKey(f"consensus key {op.key!r} appears twice in one batched cas")
        seen.add(op.key)
    return out


class Consensus(Protocol):
    """A linearizable log of ``(seqno, data)`` per key (see the module docs).

    ``compare_and_set`` returns ``True`` if it appended, ``False`` if the expectation did not
    hold. It MUST be atomic and linearizable with every other operation on the key, across
    processes. ``compare_and_set_many(ops)`` returns, per op and in order, what that op's own
    ``compare_and_set`` would have returned; one op's failed expectation MUST NOT affect another
    op, and the successful ops MUST commit in one transaction: after ``Determinate`` none of
    them did, after ``Indeterminate`` any of them may have. Keys MUST be distinct
    (``InvalidKey`` otherwise). ``scan(key, from_seqno, limit)`` returns entries with
    ``seqno >= from_seqno`` in ascending order. ``truncate(key, seqno)`` deletes entries below
    ``seqno`` and returns how many it deleted; ``seqno`` beyond the head raises
    ``TruncateBeyondHead``.
    """

    def head(self, key: str) -> VersionedData | None: ...

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool: ...

    def compare_and_set_many(self, ops: Sequence[CasOp]) -> list[bool]: ...

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]: ...

    def truncate(self, key: str, seqno: int) -> int: ...

    def list_keys(self) -> list[str]: ...

    def close(self) -> None: ...


def compare_and_set_many(consensus: object, ops: Sequence[CasOp]) -> list[bool]:
    """``consensus.compare_and_set_many(ops)``, or — for a wrapper without it (a test double) —
    one ``compare_and_set`` per op, where an error after any op ran is ``Indeterminate`` (some
    may have committed)."""
    many = getattr(consensus, "compare_and_set_many", None)
    if many is not None:
        result: list[bool] = many(ops)
        return result
    ops = check_cas_ops(ops)
    out: list[bool] = []
    for i, op in enumerate(ops):
        try:
            out.append(consensus.compare_and_set(op.key, op.expected, op.data))  # type: ignore[attr-defined]
        except Determinate as e:
            if i == 0:
                raise
            raise Indeterminate(f"batched cas: {i} of {len(ops)} ops ran, then: {e}") from e
    return out


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
