"""Retries after indeterminate outcomes and a seeded unreliable run."""

from __future__ import annotations

import contextlib
import os
import random
import uuid
from collections import Counter

import pytest

from spate.clock import ManualClock
from spate.errors import Determinate, Indeterminate, LocationError
from spate.ids import SeededIdGen, ShardId
from spate.persist import Appended, PersistClient, PersistConfig, UpperMismatch
from spate.persist.blob_mem import MemBlob
from spate.persist.consensus_mem import MemConsensus
from spate.persist.unreliable import Faults, UnreliableBlob, UnreliableConsensus
from spate.repr.arrow import table_to_updates
from tests._consensus import PassThroughConsensus
from tests.persist.conftest import DESC, A, updates


class ScriptedConsensus(PassThroughConsensus):
    """MemConsensus whose next compare-and-set fails the way a test says."""

    def __init__(self) -> None:
        super().__init__(MemConsensus())
        self.next_cas: str | None = None

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        mode, self.next_cas = self.next_cas, None
        if mode == "timeout_before":
            raise Indeterminate("scripted: timed out before running")
        ok = self.inner.compare_and_set(key, expected, data)
        if mode == "timeout_after":
            raise Indeterminate("scripted: ran, then timed out")
        return ok

    def close(self) -> None:
        pass


def _client(consensus: object, config: PersistConfig, seed: int = 1) -> PersistClient:
    return PersistClient.from_stores(
        MemBlob(),
        consensus,  # type: ignore[arg-type]
        clock=ManualClock(1),
        ids=SeededIdGen(seed),
        config=config,
        sleep=lambda s: None,
    )


@pytest.mark.parametrize(
    ("fault", "other_writer_between", "expected"),
    [
        ("timeout_before", False, "commits"),
        ("timeout_after", False, "noop"),
        ("timeout_before", True, "mismatch"),
        ("timeout_after", True, "noop"),
    ],
    ids=[
        "1-failed-then-retry-commits",
        "2-committed-then-retry-noop",
        "3-failed-other-won",
        "4-committed-other-moved-on",
    ],
)
def test_indeterminate_retry_cases(fault: str, other_writer_between: bool, expected: str) -> None:
    consensus = ScriptedConsensus()
    client = _client(consensus, PersistConfig(location_retries=0))
    shard = ShardId(uuid.UUID(int=9))
    w = client.open_writer(shard, DESC)
    other = client.open_writer(shard, DESC)
    token = uuid.UUID(int=1234)
    ours = updates([((1, "ours"), 0, 1)])
    consensus.next_cas = fault
    with pytest.raises(Indeterminate):
        w.compare_and_append(ours, expected_upper=A(0), new_upper=A(1), idempotency_token=token)
    if other_writer_between:
        cur = other.fetch_recent_upper()
        (u,) = cur.elements
        res = other.compare_and_append(
            updates([((2, "theirs"), u, 1)]),
            expected_upper=cur,
            new_upper=A(u + 1),
            idempotency_token=uuid.uuid4(),
        )
        assert isinstance(res, Appended)
    retry = w.compare_and_append(ours, expected_upper=A(0), new_upper=A(1), idempotency_token=token)
    if expected == "commits":
        assert retry == Appended(A(1), deduplicated=False)
    elif expected == "noop":
        assert retry == Appended(A(1), deduplicated=True)
    else:
        assert retry == UpperMismatch(expected=A(0), current=A(1))
    r = client.open_leased_reader(shard, DESC)
    upper = client.fetch_state(shard).upper.as_option()
    assert upper is not None
    got = Counter(row for row, _, d in table_to_updates(r.snapshot(upper - 1)) for _ in range(d))
    want = Counter()
    if expected != "mismatch":
        want[(1, "ours")] += 1
    if other_writer_between:
        want[(2, "theirs")] += 1
    assert got == want


ATTEMPTS = int(os.environ.get("SPATE_PERSIST_FAULT_ATTEMPTS", "600"))
"""Append attempts of the seeded unreliable run (each seed differs per run and is printed, so
runs add up; a soak sets more)."""


@pytest.mark.slow
def test_seeded_unreliable_run_has_no_duplicates_and_no_lost_acks(seed: int) -> None:
    rng = random.Random(seed)
    blob = UnreliableBlob(MemBlob(), random.Random(rng.getrandbits(64)), Faults(0.05, 0.05, 0.05))
    consensus = UnreliableConsensus(
        MemConsensus(), random.Random(rng.getrandbits(64)), Faults(0.05, 0.05, 0.05)
    )
    config = PersistConfig(location_retries=1, gc_every=8)
    client = PersistClient.from_stores(
        blob,
        consensus,
        clock=ManualClock(1),
        ids=SeededIdGen(seed),
        config=config,
        sleep=lambda s: None,
    )
    shard = ShardId(uuid.UUID(int=seed))

    def retrying(op):  # type: ignore[no-untyped-def]
        while True:
            try:
                return op()
            except LocationError:
                continue

    writers = [retrying(lambda: client.open_writer(shard, DESC)) for _ in range(3)]
    reader = retrying(lambda: client.open_leased_reader(shard, DESC))
    acked: dict[int, int] = {}  # row id -> time it was acknowledged at
    unknown: set[int] = set()
    attempts = 0
    indeterminate = 0
    row_id = 0
    while attempts < ATTEMPTS:
        w = rng.choice(writers)
        try:
            cur = w.fetch_recent_upper()
        except LocationError:
            attempts += 1
            continue
        (u,) = cur.elements
        row_id += 1
        token = uuid.uuid4()
        batch = updates([((row_id, f"w{writers.index(w)}"), u, 1)])
        for _try in range(6):
            attempts += 1
            try:
                res = w.compare_and_append(
                    batch, expected_upper=A(u), new_upper=A(u + 1), idempotency_token=token
                )
            except Indeterminate:
                indeterminate += 1
                continue
            except Determinate:
                continue
            if isinstance(res, Appended):
                acked[row_id] = u
            break
        else:
            unknown.add(row_id)
        if rng.random() < 0.2:
            with contextlib.suppress(LocationError):
                reader.downgrade_since(A(max(0, u - rng.randrange(0, 5))))
    blob.enabled = False
    consensus.enabled = False
    state = client.fetch_state(shard)
    (upper,) = state.upper.elements
    contents = table_to_updates(reader.snapshot(upper - 1))
    counts = Counter(row[0] for row, _, d in contents for _ in range(d))
    print(
        f"attempts={attempts} acked={len(acked)} unknown={len(unknown)} indeterminate={indeterminate}"
    )
    print(f"faults blob={blob.counts} consensus={consensus.counts}")
    assert indeterminate > ATTEMPTS // 100 and len(acked) > ATTEMPTS // 10
    assert all(d == 1 for _, _, d in contents), "a row was applied twice"
    assert all(counts[r] == 1 for r in acked), "an acknowledged write was lost"
    assert set(counts) <= set(acked) | unknown, "a row that was never attempted appeared"
    # Each upper advanced exactly once: uppers 0..upper-1 are each held by exactly one write.
    assert upper == len(counts)
    assert sorted(acked.values()) == sorted(set(acked.values()))
    # Every part the state references is readable and intact (P5).
    for b in state.batches:
        for p in b.parts:
            client._ctx(shard).fetch_part(p, reader.schema)


@pytest.mark.parametrize("mode", ["fail", "timeout_before", "timeout_after"])
def test_unreliable_wrappers_inject_each_fault_and_can_be_switched_off(mode: str) -> None:
    faults = Faults(**{m: float(m == mode) for m in ("fail", "timeout_before", "timeout_after")})
    consensus = UnreliableConsensus(MemConsensus(), random.Random(1), faults)
    blob = UnreliableBlob(MemBlob(), random.Random(2), faults)
    error = Determinate if mode == "fail" else Indeterminate
    with pytest.raises(error):
        consensus.compare_and_set("k", None, b"x")
    with pytest.raises(error):
        blob.set("k", b"x")
    # "did it, then timed out" really did it; the other faults did nothing.
    consensus.enabled = blob.enabled = False
    assert (consensus.head("k") is not None) == (mode == "timeout_after")
    assert (blob.get("k") is not None) == (mode == "timeout_after")
    assert consensus.counts[mode] == 1 and blob.counts[mode] == 1
