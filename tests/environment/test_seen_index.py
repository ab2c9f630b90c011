"""The contents of a shard seen last, and the timestamps they hold for (unit: doubles for the
runtime and persist client; real shard states and the real snapshot cache)."""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from types import SimpleNamespace

import pytest

from spate.environment import small_reads
from spate.frontier.antichain import Antichain
from spate.ids import ShardId
from spate.persist.state import BatchPart, HollowBatch, ShardState


class _Persist:
    """A persist client double: the state seen last of one shard (weak-referenceable, as the
    snapshot cache keys its caches by client)."""

    def __init__(self, state: ShardState) -> None:
        self.state = state

    def seen_state(self, shard: ShardId) -> ShardState | None:
        return self.state if shard == self.state.shard_id else None


def _batch(lower: int, upper: int, key: str | None) -> HollowBatch:
    parts = () if key is None else (BatchPart(key, 10, 1, b""),)
    return HollowBatch(Antichain.of(lower), Antichain.of(upper), Antichain.of(0), parts)


def _state(batches: tuple[HollowBatch, ...], upper: int) -> ShardState:
    shard = ShardId(uuid.UUID(int=7))
    return dataclasses.replace(
        ShardState.initial(shard), since=Antichain.of(0), upper=Antichain.of(upper), batches=batches
    )


def _runtime(state: ShardState) -> SimpleNamespace:
    return SimpleNamespace(persist=_Persist(state))


def test_contents_hold_until_the_next_batch_with_updates_or_the_upper() -> None:
    # updates in [0, 5), nothing in [5, 7), updates in [7, 10); upper 10
    state = _state((_batch(0, 5, "a"), _batch(5, 7, None), _batch(7, 10, "b")), upper=10)
    rt = _runtime(state)
    cache = small_reads._cache_of(rt)  # type: ignore[arg-type]
    cache.put(state.shard_id, ("a",), Counter({(1, "x"): 1, (2, "y"): 1}))
    cache.build_index(state.shard_id, ("a",), 0)
    for ts in (4, 5, 6):  # the contents of "a", final from 4 (its upper 5) until 7
        seen = small_reads.seen_index(rt, state.shard_id, ts, 100, 0)  # type: ignore[arg-type]
        assert seen is not None
        assert (seen.state, seen.lo, seen.hi, seen.updates) == (state, ts, 7, 1)
        assert seen.index[1] == Counter({(1, "x"): 1})
    assert small_reads.seen_index(rt, state.shard_id, 3, 100, 0) is None  # type: ignore[arg-type]
    assert small_reads.seen_index(rt, state.shard_id, 5, 0, 0) is None  # type: ignore[arg-type]
    # at 7 the batch of "b" counts: other parts, not in the cache
    assert small_reads.seen_index(rt, state.shard_id, 9, 100, 0) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("upper", [10, 6])
def test_no_error_holds_until_the_first_batch_with_updates(upper: int) -> None:
    batches = (_batch(0, 6, None), _batch(6, 10, "e")) if upper == 10 else (_batch(0, 6, None),)
    state = _state(batches, upper=upper)
    rt = _runtime(state)
    for ts in (0, 3, 5):
        assert small_reads.no_errors_until(rt, state.shard_id, ts) == (state, 6)  # type: ignore[arg-type]
    assert small_reads.no_errors_until(rt, state.shard_id, 6) is None  # type: ignore[arg-type]
