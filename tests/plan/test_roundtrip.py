"""Every IR node round-trips through the protocol codec and decodes to an equal, valid node."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import msgpack
import pytest

from spate.codec import decode, encode
from spate.errors import ProtocolError
from spate.plan import (
    AggregateExpr,
    AggregateFunc,
    ArrangeBy,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    ColumnRef,
    Constant,
    DateTrunc,
    Distinct,
    Extract,
    Filter,
    FlatMap,
    Join,
    Literal,
    Map,
    Negate,
    Now,
    Project,
    Reduce,
    RelationExpr,
    ScalarExpr,
    TableFunc,
    Threshold,
    TimeUnit,
    TopK,
    UnaryFunc,
    Union,
    VariadicFunc,
    col,
    interval,
    now,
)
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import NODE_TYPES
from spate.repr import BOOL, BYTES, DATE, FLOAT64, INT64, JSONB, TEXT, TIMESTAMP, numeric
from tests.plan.fixtures import AUCTIONS, BIDS, BIDS_DESC

SCALARS: list[ScalarExpr] = [
    ColumnRef(3),
    Literal(None, INT64),
    Literal(True, BOOL),
    Literal(-7, INT64),
    Literal(2.5, FLOAT64),
    Literal(Decimal("12.34"), numeric(6, 2)),
    Literal("héllo", TEXT),
    Literal(b"\x00\xff", BYTES),
    Literal(dt.date(2024, 2, 29), DATE),
    Literal(dt.datetime(2024, 2, 29, 23, 59, 59, 999_999), TIMESTAMP),
    Literal('{"a": [1]}', JSONB),
    Now(),
    Now(INT64),
    *[CallUnary(f, ColumnRef(0)) for f in UnaryFunc],
    *[CallBinary(f, ColumnRef(0), Literal(1, INT64)) for f in BinaryFunc],
    *[CallVariadic(f, (ColumnRef(0), ColumnRef(1))) for f in VariadicFunc],
    Case(((ColumnRef(0), Literal(1, INT64)),), None),
    Case(((ColumnRef(0), Literal(1, INT64)), (ColumnRef(1), ColumnRef(2))), Literal(0, INT64)),
    Cast(ColumnRef(1), numeric(10, 3)),
    *[DateTrunc(u, ColumnRef(4)) for u in TimeUnit if u not in (TimeUnit.DOW, TimeUnit.DOY)],
    *[Extract(u, ColumnRef(4)) for u in TimeUnit],
]


@pytest.mark.parametrize("expr", SCALARS, ids=[str(s) for s in SCALARS])
def test_scalar_roundtrip(expr: ScalarExpr) -> None:
    assert decode(encode(expr), ScalarExpr) == expr


def every_node() -> list[RelationExpr]:
    b = BIDS
    return [
        b,
        Constant((((1, "x"), 3), ((2, None), -1)), BIDS_DESC.project(["auction", "channel"])),
        b.map(x=col("price") * 2, y=col("date_time").date_trunc("hour")),
        b.filter(col("price") > 10, now() < col("date_time") + interval(hours=1)),
        Project(b, (2, 0, 2), ("p", "a", "p2")),
        FlatMap(b, TableFunc.GENERATE_SERIES, (Literal(1, INT64), ColumnRef(2)), ("i",)),
        b.flat_map("unnest", col("channel"), "web", name="c"),
        b.flat_map("string_to_table", col("channel"), ",", name="part"),
        b.join(AUCTIONS, on=[("auction", "id")], where=[col("price") > col("reserve")]),
        Join((b, b, AUCTIONS), ((0, 5, 10),)),
        b.cross_join(AUCTIONS),
        Reduce(
            b,
            (0,),
            (
                AggregateExpr(AggregateFunc.COUNT, Literal(True, BOOL)),
                AggregateExpr(AggregateFunc.SUM, ColumnRef(2), distinct=True),
                AggregateExpr(AggregateFunc.STRING_AGG, ColumnRef(3), delimiter=", "),
                AggregateExpr(AggregateFunc.AVG, ColumnRef(2)),
            ),
            ("n", "s", "chans", "mean"),
        ),
        TopK(b, (0,), (ColumnOrder(2, desc=True, nulls_last=True),), limit=3, offset=1),
        TopK(b),
        Distinct(b),
        Negate(b),
        Threshold(b),
        Union((b, Negate(b), b)),
        ArrangeBy(b, ((0,), (1, 2))),
    ]


@pytest.mark.parametrize("node", every_node(), ids=lambda n: type(n).__name__)
def test_relation_roundtrip(node: RelationExpr) -> None:
    data = encode(node)
    back = decode(data, RelationExpr)
    assert back == node
    assert back.desc == node.desc
    assert encode(back) == data


def test_every_node_type_is_covered() -> None:
    assert {type(n) for n in every_node()} == set(NODE_TYPES)


def test_decoding_revalidates() -> None:
    """A well-formed frame carrying an ill-typed plan is refused by the decoder."""
    raw = msgpack.unpackb(encode(Filter(BIDS, (col("price") > 1,))))
    predicate = raw[2]["predicates"][0]
    assert predicate[2]["right"][0] == "plan.expr.literal"
    predicate[2]["right"] = encode_raw(Literal("x", TEXT))
    with pytest.raises(ProtocolError, match=r"Filter: gt needs operands of one type: price is"):
        decode(msgpack.packb(raw), RelationExpr)
    raw = msgpack.unpackb(encode(Map(BIDS, (ColumnRef(2),), ("p",))))
    raw[2]["scalars"][0][2]["index"] = 7
    with pytest.raises(ProtocolError, match=r"Map: invalid value: Map: column #7 not found"):
        decode(msgpack.packb(raw), RelationExpr)


def encode_raw(value: object) -> object:
    return msgpack.unpackb(encode(value))
