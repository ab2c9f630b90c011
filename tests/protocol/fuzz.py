"""Frame mutators for fuzzing the decoder and a live server.

Every case is a complete byte string as a peer would send it: random bytes, or a valid frame
mutated at the byte level, at the msgpack-structure level (wrong types, missing and extra
fields, unknown tags and versions, deep nesting, huge containers), or in its header. Most
mutated bodies get a correct length so that they reach the decoder.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

import msgpack
import pyarrow as pa

from spate.codec import encode_message
from spate.frontier import Antichain
from spate.ids import GlobalId, PeekId, SeededIdGen
from spate.plan.finishing import ColumnOrder, RowSetFinishing
from spate.protocol import compute
from spate.protocol import storage as st
from spate.protocol.common import Hello
from spate.protocol.compute import (
    AllowCompaction,
    CancelPeek,
    CreateDataflow,
    CreateInstance,
    Frontiers,
    IndexTarget,
    InstanceConfig,
    Peek,
    PeekResponse,
    PeekRows,
    Schedule,
    SubscribeBatch,
    SubscribeResponse,
)
from spate.protocol.frame import HEADER, MAGIC, encode_frame
from tests.protocol.compute_model import D, dataflow
from tests.protocol.storage_model import counter, ingestion, sink

_ids = SeededIdGen(11)
U = GlobalId.user


def valid_messages() -> list[object]:
    """A pool of representative valid messages of both protocols."""
    table = pa.table({"k": [1, 2], "v": ["a", None], "_diff": [1, 3]})
    return [
        Hello(version=1, epoch=3, nonce=b"\x01" * 16),
        CreateInstance(InstanceConfig(1000, 60_000)),
        compute.InitializationComplete(),
        compute.AllowWrites(U(1)),
        compute.UpdateConfiguration(compute.ComputeParameters(max_result_size=10)),
        CreateDataflow(dataflow([U(5), U(6)], 10, subscribe=GlobalId.transient(2))),
        Schedule(U(5)),
        AllowCompaction(U(5), Antichain.of(12)),
        AllowCompaction(U(5), Antichain.empty()),
        Peek(
            target=IndexTarget(U(5)),
            uuid=PeekId.new(_ids),
            timestamp=44,
            finishing=RowSetFinishing((ColumnOrder(1, True),), 10, 2, (1,)),
            result_desc=D,
            literal_constraints=((1, "x"),),
        ),
        CancelPeek(PeekId.new(_ids)),
        Frontiers(U(5), Antichain.of(3), None, Antichain.empty()),
        PeekResponse(PeekId.new(_ids), PeekRows(table)),
        SubscribeResponse(
            U(7),
            SubscribeBatch(
                Antichain.of(1),
                Antichain.of(2),
                pa.table({"k": [1], "_time": [1], "_diff": [-1]}),
            ),
        ),
        st.InitializationComplete(),
        st.AllowWrites(),
        st.UpdateConfiguration(st.StorageParameters(statistics_interval_ms=5)),
        ingestion(U(20), [U(21), U(22)]),
        counter(U(30), U(31)),
        sink(U(40), U(21), 7),
        st.AllowCompaction(U(21), Antichain.of(9)),
        st.FrontierUpper(U(21), Antichain.of(10)),
        st.DroppedId(U(21)),
        st.StatusUpdate(U(21), st.ObjectStatus.STALLED, 5, "boom", ("hint",), {"pg": "x"}),
    ]


_INTERESTING = [
    0x00,
    0x01,
    0x7F,
    0x80,
    0xC0,
    0xC1,
    0xC2,
    0xC3,
    0xC4,
    0xC6,
    0xCF,
    0xD3,
    0xD4,
    0xD8,
    0xC7,
    0xC9,
    0xDC,
    0xDD,
    0xDE,
    0xDF,
    0xFF,
    0x90,
    0x80,
    0xA0,
]


def _random_value(rng: random.Random, depth: int = 0) -> object:
    choice = rng.randrange(14)
    if choice == 0:
        return None
    if choice == 1:
        return rng.random() < 0.5
    if choice == 2:
        return rng.choice([-1, 0, 1, 2**63 - 1, -(2**63), 2**64 - 1, 255, 65536])
    if choice == 3:
        return rng.uniform(-1e9, 1e9)
    if choice == 4:
        return rng.choice(["", "u1", "s1", "t1", "compute.peek", "storage.run_sink", "x" * 300])
    if choice == 5:
        return rng.randbytes(rng.randrange(0, 40))
    if choice == 6 and depth < 3:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if choice == 7 and depth < 3:
        return {
            str(rng.randrange(5)): _random_value(rng, depth + 1) for _ in range(rng.randrange(3))
        }
    if choice == 8:
        nested: object = 1
        for _ in range(rng.choice([50, 300, 600])):
            nested = [nested]
        return nested
    if choice == 9:
        return msgpack.ExtType(
            rng.choice([0, 1, 2, 3, 4, 5, 99, 127]), rng.randbytes(rng.randrange(0, 16))
        )
    if choice == 10:
        return [
            rng.choice(["compute.peek", "hello", "nope", "storage.allow_writes"]),
            rng.randrange(-1, 3),
            {},
        ]
    if choice == 11:
        return [0] * rng.choice([0, 1, 2, 3, 4, 1000])
    if choice == 12:
        return msgpack.ExtType(4, b"ARROW1" + rng.randbytes(rng.randrange(0, 64)))
    return rng.randrange(-(2**31), 2**31)


def _nodes(value: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [path]
    if isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_nodes(v, (*path, i)))
    elif isinstance(value, dict):
        for k, v in value.items():
            out.extend(_nodes(v, (*path, k)))
    return out


def _replace(value: object, path: tuple[object, ...], new: object) -> object:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        copy = list(value)
        copy[head] = _replace(copy[head], rest, new)  # type: ignore[index]
        return copy
    assert isinstance(value, dict)
    copy2 = dict(value)
    copy2[head] = _replace(copy2[head], rest, new)
    return copy2


def _structural(body: bytes, rng: random.Random) -> bytes:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, ext_hook=msgpack.ExtType)
    unpacker.feed(body)
    raw = unpacker.unpack()
    attachments = body[unpacker.tell() :]  # Arrow streams after the document, kept as they are
    nodes = _nodes(raw)
    path = rng.choice(nodes)
    kind = rng.randrange(4)
    if kind == 0:
        raw = _replace(raw, path, _random_value(rng))
    else:
        # Field-level edits on a field map: drop a field, add one, rename one.
        maps = [p for p in nodes if isinstance(_get(raw, p), dict)]
        if maps:
            p = rng.choice(maps)
            fields = dict(_get(raw, p))  # type: ignore[call-overload]
            if kind == 1 and fields:
                fields.pop(rng.choice(list(fields)))
            elif kind == 2:
                fields[rng.choice(["extra", "id", "", "frontier"])] = _random_value(rng)
            elif fields:
                k = rng.choice(list(fields))
                fields[k + "_"] = fields.pop(k)
            raw = _replace(raw, p, fields)
        else:
            raw = _replace(raw, path, _random_value(rng))
    return msgpack.packb(raw, use_bin_type=True) + attachments


def _get(value: object, path: tuple[object, ...]) -> object:
    for p in path:
        value = value[p]  # type: ignore[index]
    return value


def _bytewise(body: bytes, rng: random.Random) -> bytes:
    b = bytearray(body)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(6)
        if op == 0 and b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(len(b))] = rng.choice(_INTERESTING)
        elif op == 2:
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.randbytes(rng.randrange(1, 8))
        elif op == 3 and b:
            i = rng.randrange(len(b))
            del b[i : i + rng.randrange(1, 16)]
        elif op == 4 and b:
            b = b[: rng.randrange(len(b))]
        elif b:
            i = rng.randrange(len(b))
            b[i:i] = b[i : i + rng.randrange(1, 32)]
    return bytes(b)


def _header_mutation(frame: bytes, rng: random.Random) -> bytes:
    magic, version, kind, length = HEADER.unpack(frame[: HEADER.size])
    body = frame[HEADER.size :]
    op = rng.randrange(4)
    if op == 0:
        magic = rng.choice([b"PS", b"\x00\x00", b"SQ", rng.randbytes(2)])
    elif op == 1:
        version = rng.choice([0, 2, 255])
    elif op == 2:
        kind = rng.choice([1, 2, 255])
    else:
        length = rng.choice([0, max(length - 1, 0), length + 1, 2**32 - 1, 64 * 2**20 + 1])
    return HEADER.pack(magic, version, kind, length) + body


Case = Callable[[random.Random], bytes]


class FrameFuzzer:
    """Seeded generator of fuzz frames (complete byte strings as sent on the wire)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.bodies = [b"".join(encode_message(m)) for m in valid_messages()]

    def body(self) -> bytes:
        rng = self.rng
        base = rng.choice(self.bodies)
        pick = rng.randrange(10)
        if pick < 4:
            return _structural(base, rng)
        if pick < 8:
            return _bytewise(base, rng)
        if pick < 9:
            other = rng.choice(self.bodies)
            return base[: rng.randrange(len(base) + 1)] + other[rng.randrange(len(other) + 1) :]
        return rng.randbytes(rng.randrange(0, 200))

    def frame(self) -> bytes:
        rng = self.rng
        pick = rng.randrange(20)
        if pick == 0:
            return rng.randbytes(rng.randrange(0, 64))  # not even a header
        if pick == 1:
            return _header_mutation(encode_frame(rng.choice(self.bodies)), rng)
        body = self.body()
        if pick == 2:  # the length disagrees with the body
            return HEADER.pack(MAGIC, 1, 0, max(len(body) + rng.choice([-3, -1, 1, 7]), 0)) + body
        return encode_frame(body)


def pickle_like(rng: random.Random) -> bytes:
    """Bytes in other serialisation formats a careless server might accept."""
    return rng.choice(
        [b"\x80\x04\x95", b"cos\nsystem\n(S'id'\ntR.", b'{"tag": "hello"}']
    ) + struct.pack(">I", rng.randrange(2**32))
