"""The durable shard state encoding: exact round trip; anything malformed is refused."""

from __future__ import annotations

import uuid

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spate.frontier.antichain import Antichain
from spate.ids import CriticalReaderId, ReaderId, ShardId, WriterId
from spate.persist.state import (
    BatchPart,
    CriticalReaderState,
    HollowBatch,
    LeasedReaderState,
    ShardState,
    WriterState,
)
from spate.persist.state_codec import FORMAT, CorruptState, decode_state, encode_state
from tests.persist.conftest import DESC


def frontiers() -> st.SearchStrategy[Antichain[int]]:
    return st.one_of(st.just(Antichain.empty()), st.integers(0, 2**63 - 1).map(Antichain.of))


def uuids() -> st.SearchStrategy[uuid.UUID]:
    return st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i))


parts = st.builds(
    BatchPart,
    key=st.text("abcdef0123456789/.-", min_size=1, max_size=40),
    encoded_size=st.integers(0, 2**40),
    num_updates=st.integers(0, 2**40),
    checksum=st.binary(min_size=32, max_size=32),
)
batches = st.builds(
    HollowBatch,
    lower=frontiers(),
    upper=frontiers(),
    since=frontiers(),
    parts=st.lists(parts, max_size=3).map(tuple),
)
states = st.builds(
    ShardState,
    shard_id=uuids().map(ShardId),
    seqno=st.integers(0, 2**62),
    since=frontiers(),
    upper=frontiers(),
    batches=st.lists(batches, max_size=4).map(tuple),
    writers=st.dictionaries(
        uuids().map(WriterId),
        st.builds(
            WriterState,
            last_heartbeat_ms=st.integers(0, 2**50),
            lease_duration_ms=st.integers(0, 2**40),
            most_recent_token=st.none() | uuids(),
            most_recent_upper=frontiers(),
        ),
        max_size=3,
    ),
    leased_readers=st.dictionaries(
        uuids().map(ReaderId),
        st.builds(
            LeasedReaderState,
            since=frontiers(),
            seqno=st.integers(0, 2**40),
            last_heartbeat_ms=st.integers(0, 2**50),
            lease_duration_ms=st.integers(0, 2**40),
        ),
        max_size=3,
    ),
    critical_readers=st.dictionaries(
        uuids().map(CriticalReaderId),
        st.builds(CriticalReaderState, since=frontiers(), opaque=st.integers(0, 2**63 - 1)),
        max_size=2,
    ),
    desc=st.none() | st.just(DESC),
    tombstone=st.booleans(),
    walltime_ms=st.integers(0, 2**50),
    last_retire_seqno=st.integers(0, 2**40),
)


@settings(max_examples=200)
@given(states)
def test_round_trip(state: ShardState) -> None:
    assert decode_state(encode_state(state)) == state


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_decode_silently(data: bytes) -> None:
    try:
        decode_state(data)
    except CorruptState:
        return
    raise AssertionError("random bytes decoded as a shard state")


def test_unknown_format_and_wrong_field_types_are_refused() -> None:
    good = msgpack.unpackb(encode_state(ShardState.initial(ShardId(uuid.UUID(int=1)))))
    with pytest.raises(CorruptState, match="unknown format"):
        decode_state(msgpack.packb([FORMAT + 1, *good[1:]]))
    bad = list(good)
    bad[2] = "seven"
    with pytest.raises(CorruptState, match="seqno"):
        decode_state(msgpack.packb(bad))
    bad = list(good)
    bad[4] = [1, 2]
    with pytest.raises(CorruptState, match="at most one time"):
        decode_state(msgpack.packb(bad))
    bad = list(good)
    bad[1] = "not-a-shard"
    with pytest.raises(CorruptState, match="shard id"):
        decode_state(msgpack.packb(bad))
    with pytest.raises(CorruptState, match="array of 13"):
        decode_state(msgpack.packb(good[:-1]))
