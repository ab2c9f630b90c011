"""The pure shard state transitions: frontiers, leases, fencing, compaction, finalization."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from spate.errors import InvariantViolation, SchemaMismatch
from spate.frontier.antichain import Antichain
from spate.ids import CriticalReaderId, ReaderId, SeededIdGen, ShardId, WriterId
from spate.persist.compact import pick_compaction
from spate.persist.config import PersistConfig
from spate.persist.errors import InvalidAppend, LeaseExpired, NotFinalizable
from spate.persist.state import (
    Appended,
    Apply,
    BatchPart,
    HollowBatch,
    OpaqueMismatch,
    ShardState,
    SinceDowngraded,
    UpperMismatch,
    apply_compaction,
    check_invariants,
    compare_and_append,
    compare_and_downgrade_since,
    downgrade_since,
    expire_leased_reader,
    expire_stale,
    finalize,
    fold_empty,
    register_critical_reader,
    register_leased_reader,
    register_writer,
)
from spate.persist.state_codec import decode_state, encode_state
from spate.repr import INT64, TEXT, RelationDesc

A = Antichain.of
E = Antichain.empty()
DESC = RelationDesc.of(("k", INT64), ("v", TEXT))
IDS = SeededIdGen(7)
SHARD = ShardId.new(IDS)
W1, W2 = WriterId.new(IDS), WriterId.new(IDS)
R1, R2 = ReaderId.new(IDS), ReaderId.new(IDS)
C1 = CriticalReaderId.new(IDS)
LEASE = 1000


def commit(s: ShardState, new: ShardState | None) -> ShardState:
    """What the machine does: check invariants and bump the seqno."""
    assert new is not None
    new = dataclasses.replace(new, seqno=s.seqno + 1)
    check_invariants(s, new)
    return new


def part(name: str, size: int = 10) -> BatchPart:
    return BatchPart(key=f"{SHARD}/{name}", encoded_size=size, num_updates=1, checksum=b"x" * 32)


def batch(lo: int, hi: int | None, *parts: BatchPart) -> HollowBatch:
    upper = E if hi is None else A(hi)
    return HollowBatch(lower=A(lo), upper=upper, since=A(0), parts=tuple(parts))


def with_writer(s: ShardState | None = None, now: int = 0) -> ShardState:
    s = s or ShardState.initial(SHARD)
    out = register_writer(s, W1, now_ms=now, lease_ms=LEASE, desc=DESC)
    return commit(s, out.state)


def append(s: ShardState, b: HollowBatch, token: uuid.UUID, now: int = 0, writer: WriterId = W1):
    return compare_and_append(s, writer_id=writer, batch=b, token=token, now_ms=now)


def test_state_round_trips_through_the_codec() -> None:
    s = with_writer()
    s = commit(s, append(s, batch(0, 3, part("a")), uuid.UUID(int=1)).state)
    s = commit(s, register_leased_reader(s, R1, now_ms=5, lease_ms=LEASE, desc=DESC).state)
    s = commit(s, register_critical_reader(s, C1).state)
    assert decode_state(encode_state(s)) == s


def test_append_advances_upper_and_records_token() -> None:
    s = with_writer()
    out = append(s, batch(0, 3, part("a")), uuid.UUID(int=1))
    assert out.result == Appended(A(3), deduplicated=False)
    s = commit(s, out.state)
    assert s.upper == A(3) and [b.parts[0].key for b in s.batches] == [f"{SHARD}/a"]
    # Wrong expectation: a value, no change.
    out = append(s, batch(0, 5, part("b")), uuid.UUID(int=2))
    assert out.state is None and out.result == UpperMismatch(expected=A(0), current=A(3))


def test_retry_with_same_token_is_a_noop_even_after_upper_moved() -> None:
    s = with_writer()
    tok = uuid.UUID(int=1)
    s = commit(s, append(s, batch(0, 3, part("a")), tok).state)
    s = commit(s, register_writer(s, W2, now_ms=0, lease_ms=LEASE, desc=DESC).state)
    s = commit(s, append(s, batch(3, 4, part("b")), uuid.UUID(int=2), writer=W2).state)
    again = append(s, batch(0, 3, part("a2")), tok)
    assert again.state is None and again.result == Appended(A(3), deduplicated=True)
    with pytest.raises(InvalidAppend, match="idempotency token"):
        append(s, batch(0, 9, part("a3")), tok)


def test_empty_appends_fold_into_one_trailing_empty_batch() -> None:
    s = with_writer()
    s = commit(s, append(s, batch(0, 2, part("a")), uuid.UUID(int=1)).state)
    for i, hi in enumerate((3, 4, 5)):
        s = commit(s, append(s, batch(hi - 1, hi), uuid.UUID(int=10 + i)).state)
    assert [(b.lower, b.upper, b.is_empty()) for b in s.batches] == [
        (A(0), A(2), False),
        (A(2), A(5), True),
    ]
    s = commit(s, append(s, batch(5, 6, part("b")), uuid.UUID(int=20)).state)
    assert [(b.lower, b.upper) for b in s.batches] == [(A(0), A(2)), (A(2), A(6))]
    # Closing the shard: upper {} and every later append mismatches with current {}.
    s = commit(s, append(s, HollowBatch(A(6), E, A(0), ()), uuid.UUID(int=21)).state)
    assert s.upper == E
    out = append(s, batch(6, 7, part("c")), uuid.UUID(int=22))
    assert out.result == UpperMismatch(expected=A(6), current=E)


def test_since_is_the_meet_of_readers_and_never_regresses() -> None:
    s = with_writer()
    s = commit(s, register_leased_reader(s, R1, now_ms=0, lease_ms=LEASE, desc=DESC).state)
    s = commit(s, register_leased_reader(s, R2, now_ms=0, lease_ms=LEASE, desc=DESC).state)
    s = commit(s, downgrade_since(s, R1, A(5), now_ms=1).state)
    assert s.since == A(0)
    s = commit(s, downgrade_since(s, R2, A(3), now_ms=1).state)
    assert s.since == A(3)
    out = downgrade_since(s, R2, A(1), now_ms=1)  # lower request: since stays
    assert out.result.since == A(3)
    s = commit(s, out.state)
    s = commit(s, expire_leased_reader(s, R2).state)
    assert s.since == A(5)
    s = commit(s, expire_leased_reader(s, R1).state)
    assert s.since == A(5)  # no readers: the since stays
    # A reader registering now starts at the shard's since.
    out2 = register_leased_reader(s, R2, now_ms=2, lease_ms=LEASE, desc=DESC)
    assert out2.result.since == A(5)


def test_downgrade_moves_the_seqno_hold_forward() -> None:
    s = with_writer()
    s = commit(s, register_leased_reader(s, R1, now_ms=0, lease_ms=LEASE, desc=DESC).state)
    hold = s.leased_readers[R1].seqno
    for i in range(3):
        s = commit(s, append(s, batch(i, i + 1), uuid.UUID(int=i)).state)
    assert s.seqno_since() == hold
    s = commit(s, downgrade_since(s, R1, A(1), now_ms=0).state)
    assert s.leased_readers[R1].seqno == s.seqno - 1 > hold
    assert s.seqno_since() == s.seqno - 1


def test_leases_expire_by_injected_time_and_expired_handles_are_refused() -> None:
    s = with_writer(now=0)
    s = commit(s, register_leased_reader(s, R1, now_ms=0, lease_ms=LEASE, desc=DESC).state)
    s = commit(s, register_leased_reader(s, R2, now_ms=0, lease_ms=LEASE, desc=DESC).state)
    s = commit(s, downgrade_since(s, R2, A(7), now_ms=0).state)
    # R2 heartbeats (downgrades) at 900 and 1800; R1 stays silent.
    s = commit(s, downgrade_since(s, R2, A(7), now_ms=900).state)
    assert expire_stale(s, 1000) is s
    s = commit(s, downgrade_since(s, R2, A(7), now_ms=1800).state)
    assert R1 not in s.leased_readers and W1 not in s.writers
    assert s.since == A(7)  # the expired reader no longer holds the since back
    with pytest.raises(LeaseExpired, match=str(R1)):
        downgrade_since(s, R1, A(8), now_ms=1801)
    with pytest.raises(LeaseExpired, match=str(W1)):
        append(s, batch(0, 1, part("a")), uuid.UUID(int=1), now=1801)


def test_critical_since_compare_and_downgrade_and_fencing() -> None:
    s = with_writer()
    s = commit(s, register_critical_reader(s, C1).state)
    assert s.critical_readers[C1].opaque == 0
    out = compare_and_downgrade_since(s, C1, expected_opaque=0, new_opaque=1, new_since=A(2))
    assert out.result == SinceDowngraded(A(2), 1)
    s = commit(s, out.state)
    # Epoch 2 takes over.
    s = commit(
        s, compare_and_downgrade_since(s, C1, expected_opaque=1, new_opaque=2, new_since=A(2)).state
    )
    # Epoch 1 is fenced: the actual token comes back, nothing changes.
    out = compare_and_downgrade_since(s, C1, expected_opaque=1, new_opaque=1, new_since=A(9))
    assert out.state is None and out.result == OpaqueMismatch(expected=1, current=2, since=A(2))
    # A re-run of epoch 2's successful claim is recognised (indeterminate retry).
    again = compare_and_downgrade_since(s, C1, expected_opaque=1, new_opaque=2, new_since=A(2))
    assert again.state is None and isinstance(again.result, SinceDowngraded)
    # The since never moves back.
    out = compare_and_downgrade_since(s, C1, expected_opaque=2, new_opaque=2, new_since=A(1))
    assert out.result == SinceDowngraded(A(2), 2)


def test_desc_is_recorded_and_a_different_one_refused() -> None:
    s = with_writer()
    assert s.desc == DESC
    other = RelationDesc.of(("k", INT64))
    with pytest.raises(SchemaMismatch, match=str(SHARD)):
        register_writer(s, W2, now_ms=0, lease_ms=LEASE, desc=other)


def test_compaction_replaces_exactly_its_inputs() -> None:
    s = with_writer()
    for i, name in enumerate("abc"):
        s = commit(s, append(s, batch(i, i + 1, part(name)), uuid.UUID(int=i)).state)
    inputs = s.batches[1:]
    out = HollowBatch(A(1), A(3), A(0), (part("bc"),))
    s2 = commit(s, apply_compaction(s, inputs, out).state)
    assert [b.parts[0].key.split("/")[1] for b in s2.batches] == ["a", "bc"]
    assert s2.last_retire_seqno == s2.seqno
    # The same compaction again (an indeterminate retry): recognised as done, no change.
    assert apply_compaction(s2, inputs, out) == Apply(None, True)
    # Another compaction of the same inputs lost the race: no change, not applied.
    rival = HollowBatch(A(1), A(3), A(0), (part("rival"),))
    assert apply_compaction(s2, inputs, rival) == Apply(None, False)
    with pytest.raises(InvariantViolation, match="does not span"):
        apply_compaction(s, inputs, HollowBatch(A(1), A(2), A(0), ()))


def test_fold_empty_moves_empty_ranges_into_the_next_batch() -> None:
    bs = (batch(0, 2, part("a")), batch(2, 4), batch(4, 6, part("b")), batch(6, 9))
    assert [(b.lower, b.upper) for b in fold_empty(bs)] == [
        (A(0), A(2)),
        (A(2), A(6)),
        (A(6), A(9)),
    ]


def test_finalize_needs_empty_since_and_upper() -> None:
    s = with_writer()
    s = commit(s, register_critical_reader(s, C1).state)
    with pytest.raises(NotFinalizable, match=r"since \{0\} and upper \{0\}"):
        finalize(s)
    s = commit(s, append(s, batch(0, None, part("a")), uuid.UUID(int=1)).state)
    s = commit(
        s, compare_and_downgrade_since(s, C1, expected_opaque=0, new_opaque=0, new_since=E).state
    )
    assert s.since == E and s.upper == E
    s = commit(s, finalize(s).state)
    assert s.tombstone and s.batches == () and s.writers == {}
    assert finalize(s).state is None
    # Operations on a tombstone are no-ops or report the empty upper.
    assert append(s, batch(0, 1), uuid.UUID(int=2)).result == UpperMismatch(A(0), E)


def test_invariant_check_catches_regressions() -> None:
    s = with_writer()
    s2 = commit(s, append(s, batch(0, 3, part("a")), uuid.UUID(int=1)).state)
    with pytest.raises(InvariantViolation, match="upper regressed"):
        check_invariants(s2, dataclasses.replace(s2, upper=A(1)))
    with pytest.raises(InvariantViolation, match="not contiguous"):
        check_invariants(s2, dataclasses.replace(s2, batches=(batch(0, 1, part("x")), batch(2, 3))))


@pytest.mark.parametrize("factor", [2.0, PersistConfig().compaction_factor])
def test_small_runs_wait_for_enough_inputs_before_compaction(factor: float) -> None:
    """Appends of small batches are merged once a run has ``min_inputs`` batches (a merge has
    a fixed cost), or sooner once the run is ``min_bytes`` large; the shard stays bounded."""
    s = with_writer()
    for i in range(7):
        s = commit(s, append(s, batch(i, i + 1, part(f"p{i}")), uuid.UUID(int=i)).state)
    assert pick_compaction(s, factor=factor) is not None  # no floor: every pair is merged
    assert pick_compaction(s, factor=factor, min_inputs=8, min_bytes=1_000) is None
    assert pick_compaction(s, factor=factor, min_inputs=8, min_bytes=70) is not None
    s = commit(s, append(s, batch(7, 8, part("p7")), uuid.UUID(int=7)).state)
    req = pick_compaction(s, factor=factor, min_inputs=8, min_bytes=1_000)
    assert req is not None and len(req.inputs) == 8
    # Over many appends (merged as maintenance would) the shard keeps few batches.
    most = 0
    for i in range(8, 400):
        s = commit(s, append(s, batch(i, i + 1, part(f"p{i}")), uuid.UUID(int=i)).state)
        while (req := pick_compaction(s, factor=factor, min_inputs=8, min_bytes=10**6)) is not None:
            merged = dataclasses.replace(
                part(f"m{i}", sum(b.encoded_size for b in req.inputs)),
                num_updates=sum(b.num_updates for b in req.inputs),
            )
            out = HollowBatch(req.inputs[0].lower, req.inputs[-1].upper, A(0), (merged,))
            s = commit(s, apply_compaction(s, req.inputs, out).state)
        most = max(most, len(s.batches))
    assert most <= 16


def test_compaction_tiers_weigh_updates_not_encoded_bytes() -> None:
    """A merged batch (compressed: few bytes per update) is not pulled into a run of fresh
    small appends (uncompressed: about three times the bytes per update) that has fewer
    updates than half of it, as it would be if the tiers compared encoded bytes."""
    s = with_writer()

    def sized(name: str, size: int, updates: int) -> BatchPart:
        return BatchPart(
            key=f"{SHARD}/{name}", encoded_size=size, num_updates=updates, checksum=b"x" * 32
        )

    s = commit(s, append(s, batch(0, 1, sized("m", 530_000, 34_500)), uuid.UUID(int=0)).state)
    for i in range(1, 9):
        p = sized(f"p{i}", 73_704, 1_500)
        s = commit(s, append(s, batch(i, i + 1, p), uuid.UUID(int=i)).state)
    req = pick_compaction(s, factor=2.0, min_inputs=8, min_bytes=8 * 2**20)
    assert req is not None
    assert [b.parts[0].key for b in req.inputs] == [f"{SHARD}/p{i}" for i in range(1, 9)]
