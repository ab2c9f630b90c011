"""Ids print with a prefix and parse their own printed form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.errors import InvalidId
from spate.ids import (
    CONTROLLER_CRITICAL_SINCE,
    CriticalReaderId,
    GlobalId,
    InstanceId,
    PeekId,
    ReaderId,
    ReplicaId,
    SeededIdGen,
    ShardId,
    WriterId,
)


@given(st.sampled_from(["s", "u", "t"]), st.integers(0, 2**63))
def test_global_id_round_trip(kind: str, n: int) -> None:
    gid = GlobalId(kind, n)  # type: ignore[arg-type]
    assert GlobalId.parse(str(gid)) == gid


def test_global_id_order_and_printing() -> None:
    assert str(GlobalId.user(42)) == "u42"
    assert GlobalId.system(99) < GlobalId.user(1) < GlobalId.transient(0)
    assert sorted([GlobalId.user(10), GlobalId.user(2)]) == [GlobalId.user(2), GlobalId.user(10)]


@pytest.mark.parametrize("text", ["", "u", "x1", "u-1", "u1.5", "42", "uu1"])
def test_global_id_rejects(text: str) -> None:
    with pytest.raises(InvalidId, match="not a global id"):
        GlobalId.parse(text)


def test_numbered_and_uuid_ids() -> None:
    assert str(InstanceId(3)) == "i3" and InstanceId.parse("i3") == InstanceId(3)
    assert str(ReplicaId(1)) == "r1" and ReplicaId.parse("r1") == ReplicaId(1)
    gen = SeededIdGen(7)
    for cls, prefix in [
        (ShardId, "s"),
        (WriterId, "w"),
        (ReaderId, "r"),
        (CriticalReaderId, "c"),
        (PeekId, ""),
    ]:
        value = cls.new(gen)
        text = str(value)
        assert text.startswith(prefix) and len(text) == len(prefix) + 36
        assert cls.parse(text) == value
    assert str(CONTROLLER_CRITICAL_SINCE) == "c00000000-1111-2222-3333-444444444444"
    with pytest.raises(InvalidId, match="not a ShardId"):
        ShardId.parse("s1234")
    with pytest.raises(InvalidId):
        ReplicaId(-1)


def test_seeded_ids_are_reproducible() -> None:
    a, b = SeededIdGen(1), SeededIdGen(1)
    assert [a.uuid() for _ in range(3)] == [b.uuid() for _ in range(3)]
