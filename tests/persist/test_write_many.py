"""compare_and_append_many: several shards' appends with one consensus commit."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest

from spate.clock import ManualClock
from spate.ids import SeededIdGen, ShardId
from spate.persist import Appended, PersistClient, PersistConfig, PersistLocation, UpperMismatch
from spate.persist.blob_mem import MemBlob
from spate.persist.consensus_mem import MemConsensus
from spate.persist.consensus_sqlite import SqliteConsensus
from spate.persist.unreliable import Faults, UnreliableConsensus
from spate.persist.write import WriteHandle
from spate.persist.write_many import AppendRequest, compare_and_append_many
from spate.repr.arrow import table_to_updates
from tests._crash_child import records_until_killed
from tests.persist.conftest import DESC, A, tok, updates


def _shards(n: int) -> list[ShardId]:
    return sorted((ShardId(uuid.UUID(int=i + 1)) for i in range(n)), key=str)


def _rows(client: PersistClient, shard: ShardId, upper: int) -> list[object]:
    r = client.open_leased_reader(shard, DESC)
    try:
        return sorted(
            ((row, d) for row, _t, d in table_to_updates(r.snapshot(upper - 1))), key=repr
        )
    finally:
        r.expire()


def _req(w: WriteHandle, rows: list[int] | None, lower: int, upper: int) -> AppendRequest:
    table = None if rows is None else updates([((k, "x"), lower, 1) for k in rows])
    return AppendRequest(w, table, A(lower), A(upper), tok())


def test_appends_to_every_shard_with_one_commit_and_no_blob_for_an_empty_one(
    client: PersistClient,
) -> None:
    assert isinstance(client.consensus, SqliteConsensus)
    s = _shards(3)
    ws = [client.open_writer(sh, DESC) for sh in s]
    blobs_before = {sh: len(list(client.blob.list_keys(f"{sh}/"))) for sh in s}
    commits = client.consensus.commits
    out = compare_and_append_many(
        [_req(ws[0], [1, 2], 0, 5), _req(ws[1], None, 0, 5), _req(ws[2], [3], 0, 5)]
    )
    assert out == [Appended(A(5), deduplicated=False)] * 3
    assert client.consensus.commits == commits + 1
    blobs_after = {sh: len(list(client.blob.list_keys(f"{sh}/"))) for sh in s}
    assert blobs_after[s[1]] == blobs_before[s[1]]  # the empty append wrote no blob
    assert blobs_after[s[0]] == blobs_before[s[0]] + 1
    assert _rows(client, s[0], 5) == [((1, "x"), 1), ((2, "x"), 1)]
    assert _rows(client, s[1], 5) == []
    assert _rows(client, s[2], 5) == [((3, "x"), 1)]
    assert [w.fetch_recent_upper() for w in ws] == [A(5)] * 3


def test_a_shard_another_writer_moved_loses_alone(client: PersistClient) -> None:
    s = _shards(3)
    ws = [client.open_writer(sh, DESC) for sh in s]
    other = client.open_writer(s[1], DESC)
    assert isinstance(
        other.compare_and_append(
            updates([((9, "o"), 0, 1)]),
            expected_upper=A(0),
            new_upper=A(2),
            idempotency_token=tok(),
        ),
        Appended,
    )
    blobs = len(list(client.blob.list_keys(f"{s[1]}/")))
    out = compare_and_append_many([_req(w, [1], 0, 3) for w in ws])
    assert out[0] == out[2] == Appended(A(3), deduplicated=False)
    assert out[1] == UpperMismatch(expected=A(0), current=A(2))
    assert len(list(client.blob.list_keys(f"{s[1]}/"))) == blobs  # the loser's blob is gone
    assert _rows(client, s[1], 2) == [((9, "o"), 1)]


def test_a_stale_cached_state_loses_the_batched_cas_then_appends_alone(
    client: PersistClient,
) -> None:
    s = _shards(2)
    ws = [client.open_writer(sh, DESC) for sh in s]
    # Another client registers a writer on shard 0: its seqno moves, its upper does not, so
    # our cached state is stale and the batched compare-and-set of shard 0 loses.
    other = PersistClient(
        client.location, clock=ManualClock(1_700_000_000_000), ids=SeededIdGen(99)
    )
    other.open_writer(s[0], DESC)
    commits = client.consensus.commits  # type: ignore[attr-defined]
    mismatches = ws[0]._ctx.machine.cas_mismatches
    out = compare_and_append_many([_req(w, [1], 0, 3) for w in ws])
    assert out == [Appended(A(3), deduplicated=False)] * 2
    assert ws[0]._ctx.machine.cas_mismatches == mismatches + 1
    assert client.consensus.commits == commits + 2  # type: ignore[attr-defined]
    assert _rows(client, s[0], 3) == [((1, "x"), 1)]
    other.close()


def test_retrying_with_the_same_tokens_is_a_noop(client: PersistClient) -> None:
    s = _shards(2)
    ws = [client.open_writer(sh, DESC) for sh in s]
    reqs = [_req(w, [1], 0, 3) for w in ws]
    assert compare_and_append_many(reqs) == [Appended(A(3), deduplicated=False)] * 2
    assert compare_and_append_many(reqs) == [Appended(A(3), deduplicated=True)] * 2
    assert _rows(client, s[0], 3) == [((1, "x"), 1)]


def test_a_usage_error_is_that_requests_outcome_only(client: PersistClient) -> None:
    s = _shards(2)
    ws = [client.open_writer(sh, DESC) for sh in s]
    bad = AppendRequest(ws[0], updates([((1, "x"), 7, 1)]), A(0), A(3), tok())  # beyond upper
    out = compare_and_append_many([bad, _req(ws[1], [1], 0, 3)])
    assert isinstance(out[0], Exception)
    assert out[1] == Appended(A(3), deduplicated=False)
    with pytest.raises(ValueError, match="twice"):
        compare_and_append_many([_req(ws[1], [1], 3, 4), _req(ws[1], [1], 3, 4)])


@pytest.mark.parametrize("seed", range(6))
def test_unreliable_consensus_appends_each_shard_exactly_once(seed: int) -> None:
    print(f"seed={seed} (replay: pytest -k 'test_unreliable_consensus_appends and {seed}')")
    inner = MemConsensus()
    consensus = UnreliableConsensus(inner, random.Random(seed), Faults(0.2, 0.2, 0.2))
    client = PersistClient.from_stores(
        MemBlob(),
        consensus,
        clock=ManualClock(1),
        ids=SeededIdGen(seed),
        config=PersistConfig(location_retries=50, maintenance=False),
        sleep=lambda s: None,
    )
    s = _shards(3)
    consensus.enabled = False
    ws = [client.open_writer(sh, DESC) for sh in s]
    consensus.enabled = True
    uppers = [0, 0, 0]
    for step in range(8):
        reqs = [_req(w, [step], uppers[i], uppers[i] + 1) for i, w in enumerate(ws)]
        for _ in range(20):  # retry an Indeterminate with the same tokens
            out = compare_and_append_many(reqs)
            if all(isinstance(o, Appended) for o in out):
                break
            assert all(isinstance(o, (Appended, Exception)) for o in out), out
        else:
            pytest.fail(f"seed {seed}: step {step} did not finish: {out}")
        uppers = [u + 1 for u in uppers]
    consensus.enabled = False
    for sh in s:
        rows = _rows(client, sh, 8)
        assert [r[0][0] for r in rows] == list(range(8)), rows  # type: ignore[index]
    client.close()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("point", "in_flight_landed"),
    [
        ("persist.after_blob_set@5", False),  # round 1's second blob
        ("persist.before_cas@2", False),  # round 1's batch, not yet sent
        ("consensus.mid_batch_cas@3", False),  # round 2's batch: one insert, no commit
        ("persist.after_cas_before_ack@4", True),  # round 1's batch committed, not acked
    ],
)
def test_kill_during_a_batched_append_leaves_each_shard_whole_or_untouched(
    tmp_path: Path, point: str, in_flight_landed: bool
) -> None:
    location = PersistLocation.embedded(tmp_path / "data")
    s = _shards(3)
    records = records_until_killed(
        [
            "tests.persist._children",
            "many",
            "--blob",
            location.blob_uri,
            "--consensus",
            location.consensus_uri,
            "--shards",
            ",".join(str(sh) for sh in s),
            "--writes",
            "6",
        ],
        point,
    )
    acked = [r["ack"] for r in records if "ack" in r]
    in_flight = records[-1]["attempt"]
    assert acked == list(range(in_flight))
    client = PersistClient(location, clock=ManualClock(1_700_000_000_000), ids=SeededIdGen(5))
    try:
        landed = in_flight + 1 if in_flight_landed else in_flight
        for sh in s:
            upper = client.open_writer(sh, DESC).fetch_recent_upper()
            assert upper == A(landed), (point, sh, upper)
            if landed:
                assert _rows(client, sh, landed) == [((u, "row"), 1) for u in range(landed)]
    finally:
        client.close()
