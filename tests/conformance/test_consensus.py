"""The Consensus conformance suite: mem, SQLite and PostgreSQL all pass it."""

from __future__ import annotations

import threading

import pytest

from spate.persist.errors import InvalidKey, TruncateBeyondHead
from spate.persist.location import CasOp, Consensus, VersionedData


def test_head_of_absent_key_is_none(consensus: Consensus) -> None:
    assert consensus.head("k") is None
    assert consensus.scan("k", 0, 10) == []


def test_first_cas_expects_none_and_writes_seqno_zero(consensus: Consensus) -> None:
    assert consensus.compare_and_set("k", None, b"a") is True
    assert consensus.head("k") == VersionedData(0, b"a")
    # The key exists now: expecting "absent" again fails, and nothing changes.
    assert consensus.compare_and_set("k", None, b"b") is False
    assert consensus.head("k") == VersionedData(0, b"a")


def test_cas_with_wrong_expectation_changes_nothing(consensus: Consensus) -> None:
    assert consensus.compare_and_set("k", None, b"0")
    assert consensus.compare_and_set("k", 0, b"1")
    for wrong in (0, 2, 5):  # lower (equal to an old seqno), greater, far greater
        assert consensus.compare_and_set("k", wrong, b"x") is False
    assert consensus.compare_and_set("k", None, b"x") is False
    assert consensus.head("k") == VersionedData(1, b"1")
    assert consensus.compare_and_set("k", 1, b"2")
    assert consensus.head("k") == VersionedData(2, b"2")


def test_cas_on_a_fresh_key_with_an_expected_seqno_fails(consensus: Consensus) -> None:
    assert consensus.compare_and_set("fresh", 0, b"x") is False
    assert consensus.head("fresh") is None


def test_scan_returns_ascending_entries_from_seqno_with_limit(consensus: Consensus) -> None:
    expected: int | None = None
    for i in range(6):
        assert consensus.compare_and_set("k", expected, f"v{i}".encode())
        expected = i
    assert [e.seqno for e in consensus.scan("k", 0, 100)] == [0, 1, 2, 3, 4, 5]
    assert consensus.scan("k", 2, 3) == [
        VersionedData(2, b"v2"),
        VersionedData(3, b"v3"),
        VersionedData(4, b"v4"),
    ]
    assert consensus.scan("k", 6, 10) == []


def test_truncate_deletes_below_and_keeps_head(consensus: Consensus) -> None:
    expected: int | None = None
    for i in range(5):
        assert consensus.compare_and_set("k", expected, bytes([i]))
        expected = i
    assert consensus.truncate("k", 3) == 3
    assert [e.seqno for e in consensus.scan("k", 0, 100)] == [3, 4]
    assert consensus.truncate("k", 3) == 0
    assert consensus.truncate("k", 4) == 1
    assert consensus.head("k") == VersionedData(4, bytes([4]))
    # Appends continue after the truncated entries.
    assert consensus.compare_and_set("k", 4, b"next")
    assert consensus.head("k") == VersionedData(5, b"next")


def test_truncate_beyond_head_is_refused(consensus: Consensus) -> None:
    with pytest.raises(TruncateBeyondHead):
        consensus.truncate("missing", 0)
    assert consensus.compare_and_set("k", None, b"0")
    with pytest.raises(TruncateBeyondHead) as e:
        consensus.truncate("k", 1)
    assert "head is 0" in str(e.value)
    assert consensus.head("k") == VersionedData(0, b"0")


def test_keys_are_independent_and_listed(consensus: Consensus) -> None:
    assert consensus.compare_and_set("a", None, b"a0")
    assert consensus.compare_and_set("b", None, b"b0")
    assert consensus.compare_and_set("a", 0, b"a1")
    assert consensus.head("b") == VersionedData(0, b"b0")
    assert consensus.list_keys() == ["a", "b"]


def test_racing_threads_get_exactly_one_winner_per_seqno(consensus: Consensus) -> None:
    wins: list[tuple[int, int]] = []
    lock = threading.Lock()

    def racer(i: int) -> None:
        for _ in range(25):
            head = consensus.head("race")
            expected = None if head is None else head.seqno
            if consensus.compare_and_set("race", expected, f"{i}".encode()):
                with lock:
                    wins.append((0 if expected is None else expected + 1, i))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqnos = sorted(s for s, _ in wins)
    assert seqnos == list(range(len(seqnos)))
    entries = consensus.scan("race", 0, 1000)
    assert [e.seqno for e in entries] == seqnos
    assert {e.seqno: e.data for e in entries} == {s: f"{i}".encode() for s, i in wins}


# -- batched compare-and-set ------------------------------------------------------------------


def test_cas_many_gives_each_op_its_own_outcome(consensus: Consensus) -> None:
    assert consensus.compare_and_set("a", None, b"a0")
    assert consensus.compare_and_set("b", None, b"b0")
    assert consensus.compare_and_set("b", 0, b"b1")
    ops = [
        CasOp("a", 0, b"a1"),  # holds
        CasOp("b", 0, b"bx"),  # stale: b is at 1
        CasOp("c", None, b"c0"),  # a fresh key
        CasOp("d", 3, b"dx"),  # a fresh key with an expected seqno
    ]
    assert consensus.compare_and_set_many(ops) == [True, False, True, False]
    assert consensus.head("a") == VersionedData(1, b"a1")
    assert consensus.head("b") == VersionedData(1, b"b1")
    assert consensus.head("c") == VersionedData(0, b"c0")
    assert consensus.head("d") is None
    # Truncation is untouched: every entry is still there.
    assert [e.seqno for e in consensus.scan("b", 0, 10)] == [0, 1]
    assert consensus.compare_and_set_many([]) == []


def test_cas_many_commits_once(consensus: Consensus) -> None:
    ops = [CasOp(f"k{i}", None, bytes([i])) for i in range(5)]
    before = consensus.commits  # type: ignore[attr-defined]
    assert consensus.compare_and_set_many(ops) == [True] * 5
    assert consensus.commits == before + 1  # type: ignore[attr-defined]
    assert consensus.list_keys() == [f"k{i}" for i in range(5)]


def test_cas_many_rejects_a_key_twice_and_writes_nothing(consensus: Consensus) -> None:
    with pytest.raises(InvalidKey):
        consensus.compare_and_set_many([CasOp("k", None, b"1"), CasOp("k", None, b"2")])
    assert consensus.head("k") is None


def test_concurrent_cas_many_on_overlapping_keys_lets_one_win_per_key(
    consensus: Consensus,
) -> None:
    # Each writer batches the same keys (in different orders) expecting them absent: per key
    # exactly one writer wins, and no batch blocks another for ever.
    keys = [f"k{i}" for i in range(6)]
    results: dict[int, list[bool]] = {}

    def writer(n: int) -> None:
        order = keys if n % 2 == 0 else list(reversed(keys))
        out = consensus.compare_and_set_many([CasOp(k, None, bytes([n])) for k in order])
        results[n] = out if n % 2 == 0 else list(reversed(out))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, k in enumerate(keys):
        winners = [n for n in range(4) if results[n][i]]
        assert len(winners) == 1
        assert consensus.head(k) == VersionedData(0, bytes(winners))
