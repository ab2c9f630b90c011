"""The strict codec core: registered types round-trip; anything else is a ProtocolError."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from decimal import Decimal

import msgpack
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.codec import decode, decode_any, encode
from spate.errors import ProtocolError
from spate.frontier import Antichain, Frontier, ReadPolicy
from spate.ids import GlobalId, ShardId
from spate.repr import RelationDesc
from spate.repr.types import Row
from spate.testing.strategies import relation_descs, rows
from spate.wire import wire


@wire("test.sample")
@dataclass(frozen=True, slots=True)
class Sample:
    id: GlobalId
    upper: Frontier
    rows: tuple[Row, ...]
    shard: ShardId | None
    policy: ReadPolicy
    counts: dict[str, int]
    table: pa.Table | None = None


def _sample(**kw: object) -> Sample:
    base = dict(
        id=GlobalId.user(3),
        upper=Antichain.of(10),
        rows=(
            (
                1,
                "a",
                None,
                Decimal("1.50"),
                dt.date(2020, 1, 1),
                dt.datetime(2020, 1, 1, 1, 1, 1, 5),
                b"z",
                True,
                2.5,
            ),
        ),
        shard=None,
        policy=ReadPolicy.lag_writes_by(5, 1),
        counts={"a": 1},
    )
    base.update(kw)
    return Sample(**base)  # type: ignore[arg-type]


def test_round_trip() -> None:
    s = _sample()
    assert decode(encode(s), Sample) == s
    assert decode_any(encode(s)) == s
    t = pa.table({"a": [1, 2, 3]})
    back = decode(encode(_sample(table=t, upper=Antichain.empty())), Sample)
    assert back.table is not None and back.table.equals(t)
    assert back.upper == Antichain.empty()


@given(data=st.data())
def test_rows_of_any_desc_round_trip(data: st.DataObject) -> None:
    desc = data.draw(relation_descs())
    rs = tuple(data.draw(st.lists(rows(desc), max_size=4)))
    s = _sample(rows=rs)
    assert decode(encode(s), Sample).rows == rs
    assert decode(encode(desc), RelationDesc) == desc


def _raw(fields: dict) -> bytes:
    return msgpack.packb(["test.sample", 1, fields], use_bin_type=True)


def _fields() -> dict:
    return msgpack.unpackb(
        encode(_sample()), raw=False, strict_map_key=False, ext_hook=msgpack.ExtType
    )[2]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.pop("upper"), "Sample: missing field 'upper'"),
        (lambda f: f.update(extra=1), "Sample: unexpected field 'extra'"),
        (lambda f: f.update(id=3), "Sample.id: expected GlobalId, got int 3"),
        (lambda f: f.update(id="x3"), "Sample.id: not a global id"),
        (lambda f: f.update(upper=[1, 2]), "Sample.upper: expected frontier of at most one time"),
        (lambda f: f.update(upper=[-1]), "Sample.upper: expected non-negative int time"),
        (lambda f: f.update(rows=[[[1]]]), r"Sample.rows\[0\]\[0\]: expected a scalar datum"),
        (lambda f: f.update(counts=[["a", "b"]]), r"Sample.counts\[a\]: expected int, got str"),
        (lambda f: f.update(policy=["nope", 1, {}]), "unknown message tag 'nope'"),
        (
            lambda f: f.update(policy=["test.sample", 1, {}]),
            "Sample.policy: expected ReadPolicy, got Sample",
        ),
        (
            lambda f: f.update(
                policy=["read_policy.lag_writes_by", 1, {"lag": -1, "max_granularity": 1}]
            ),
            "LagWritesBy: invalid value: lag_writes_by: lag must be",
        ),
        (
            lambda f: f.update(policy=["read_policy.step_back", 9, {}]),
            "read_policy.step_back version 9 not supported",
        ),
    ],
)
def test_bad_fields_are_protocol_errors_naming_the_field(mutate, message: str) -> None:
    fields = _fields()
    mutate(fields)
    with pytest.raises(ProtocolError, match=message):
        decode(_raw(fields), Sample)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",
        b"\x93",
        msgpack.packb([1, 2, 3]),
        msgpack.packb(msgpack.ExtType(99, b"x")),
        msgpack.packb(msgpack.ExtType(3, b"short")),
        b"\x91" * 100_000,
    ],
)
def test_garbage_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_any(data)


def test_pickle_payload_is_refused_and_never_executed(tmp_path) -> None:
    import pickle

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    for payload in (pickle.dumps(Evil()), msgpack.packb(["test.sample", 1, pickle.dumps(Evil())])):
        with pytest.raises(ProtocolError):
            decode(payload, Sample)
    assert not marker.exists()


def test_unregistered_values_do_not_encode() -> None:
    with pytest.raises(ProtocolError, match="cannot encode a object"):
        encode(object())
    with pytest.raises(ProtocolError, match="does not fit in 64 bits"):
        encode(_sample(counts={"a": 2**64}))
