"""Plans are validated when built: types and columns inferred, errors name node and column."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from spate.errors import ColumnMissing
from spate.plan import (
    BinaryFunc,
    CallBinary,
    Cast,
    ColumnRef,
    Constant,
    Filter,
    Get,
    InvalidPlan,
    Join,
    Literal,
    Map,
    PlanColumnMissing,
    PlanTypeError,
    Project,
    Reduce,
    TopK,
    Union,
    avg,
    case,
    coalesce,
    col,
    count,
    desc,
    interval,
    lit,
    max_,
    now,
    now_ms,
    string_agg,
    sum_,
)
from spate.plan.finishing import ColumnOrder
from spate.repr import DATE, FLOAT64, INT64, TEXT, TIMESTAMP, RelationDesc, numeric
from tests.plan.fixtures import AUCTIONS, BIDS, BIDS_DESC, BIDS_ID, PEOPLE


def test_builder_example_from_the_issue() -> None:
    q = BIDS.filter(col("price") > 10).reduce(["auction"], top=max_(col("price")))
    assert isinstance(q, Reduce)
    assert str(q.desc) == "(auction int64 not null, top int64 not null)"
    assert q.group_key == (0,)
    f = q.input
    assert isinstance(f, Filter)
    assert f.predicates == (CallBinary(BinaryFunc.GT, ColumnRef(2), Literal(10, INT64)),)


def test_unknown_column_names_the_node_and_the_columns() -> None:
    with pytest.raises(PlanColumnMissing) as e:
        BIDS.filter(col("prise") > 10)
    assert str(e.value) == (
        "Filter: column 'prise' not found; columns: auction, bidder, price, channel, date_time"
    )
    assert isinstance(e.value, KeyError) and isinstance(e.value, ColumnMissing)
    with pytest.raises(PlanColumnMissing, match=r"^Reduce: column 'cost' not found"):
        BIDS.reduce(["auction"], total=sum_(col("cost")))
    with pytest.raises(
        PlanColumnMissing,
        match=r"^group key 'auc' not found; columns: auction, bidder, price, channel, date_time$",
    ):
        BIDS.reduce(["auc"])
    with pytest.raises(PlanColumnMissing, match=r"^Map: column #9 not found; the input has 5"):
        Map(BIDS, (ColumnRef(9),), ("x",))


def test_type_mismatch_messages() -> None:
    with pytest.raises(PlanTypeError) as e:
        BIDS.filter(col("price") > "cheap")
    assert str(e.value) == (
        "Filter: gt needs operands of one type: price is int64, 'cheap' is text"
        " in (price > 'cheap')"
    )
    with pytest.raises(PlanTypeError) as e:
        BIDS.filter(col("price") + 1)
    assert str(e.value) == "Filter: predicate must be bool, got int64: (price + 1)"
    with pytest.raises(PlanTypeError) as e:
        BIDS.map(x=col("channel").lower() + 1)
    assert str(e.value) == (
        "Map: add needs operands of one type: lower(channel) is text, 1 is int64"
        " in (lower(channel) + 1)"
    )
    with pytest.raises(PlanTypeError) as e:
        BIDS.reduce(["auction"], s=sum_(col("channel")))
    assert str(e.value) == "Reduce: s: sum expects int64, float64 or numeric, got text: channel"
    with pytest.raises(PlanTypeError, match=r"^Filter: expected a scalar expression, got bool"):
        BIDS.filter(col("price") == 3)  # type: ignore[arg-type]


def test_map_infers_types_and_nullability() -> None:
    m = BIDS.map(
        half=col("price") / 2,
        euros=col("price") * 0.9,
        chan=coalesce(col("channel"), "none"),
        shout=col("channel").upper(),
        day=col("date_time").date_trunc("day"),
        later=col("date_time") + interval(hours=1),
        dow=col("date_time").extract("dow"),
        big=case((col("price") > 100, "big"), otherwise="small"),
        maybe=case((col("price") > 100, "big")),
    )
    got = {c.name: str(c.type) + ("" if c.nullable else "!") for c in m.desc.columns[5:]}
    assert got == {
        "half": "int64",  # division by zero gives NULL
        "euros": "float64!",
        "chan": "text!",
        "shout": "text",
        "day": "timestamp!",
        "later": "timestamp!",
        "dow": "int64!",
        "big": "text!",
        "maybe": "text",
    }
    # int64 * float64: the int side gets an explicit cast in the IR.
    assert m.scalars[1] == CallBinary(
        BinaryFunc.MUL, Cast(ColumnRef(2), FLOAT64), Literal(0.9, FLOAT64)
    )
    # timestamp + interval resolves to the typed time function.
    assert m.scalars[5] == CallBinary(
        BinaryFunc.TIMESTAMP_ADD_MS, ColumnRef(4), Literal(3_600_000, INT64)
    )


def test_map_columns_can_use_earlier_ones() -> None:
    m = BIDS.map(a=col("price") + 1, b=col("a") * 2)
    assert m.desc.names[-2:] == ("a", "b")
    assert m.scalars[1] == CallBinary(BinaryFunc.MUL, ColumnRef(5), Literal(2, INT64))


def test_literal_promotion_and_numeric() -> None:
    d = RelationDesc.of(("amount", numeric(10, 2), False), ("n", INT64, False))
    g = Get(BIDS_ID, d)
    m = g.map(x=col("amount") + col("n"), y=col("amount") * col("amount"))
    assert str(m.desc.columns[2].type) == "numeric(38,2)"
    assert str(m.desc.columns[3].type) == "numeric(38,4)"
    f = g.filter(col("amount") > 1)
    assert f.predicates[0] == CallBinary(
        BinaryFunc.GT, ColumnRef(0), Literal(Decimal(1), numeric(38, 2))
    )
    q = g.map(z=col("amount") / col("amount")).desc.columns[2]
    assert (str(q.type), q.nullable) == ("numeric(38,24)", True)  # NULL for a zero divisor


def test_dates_compare_with_timestamps_and_move_by_days() -> None:
    d = RelationDesc.of(("d", DATE, False), ("ts", TIMESTAMP, False))
    g = Get(BIDS_ID, d)
    f = g.filter(col("d") < col("ts"), col("d") > dt.date(2020, 1, 1))
    assert f.predicates[0] == CallBinary(BinaryFunc.LT, Cast(ColumnRef(0), TIMESTAMP), ColumnRef(1))
    m = g.map(tomorrow=col("d") + interval(days=1))
    assert m.desc.columns[2].type == DATE
    with pytest.raises(PlanTypeError, match="a date moves by whole days"):
        g.map(x=col("d") + interval(hours=1))


def test_now_only_in_filters() -> None:
    with pytest.raises(InvalidPlan) as e:
        BIDS.map(t=now())
    assert (
        str(e.value) == "Map: now() may only appear in Filter predicates (temporal filters): now()"
    )
    with pytest.raises(InvalidPlan, match=r"^Filter: unsupported use of now\(\) in"):
        BIDS.filter((now() < col("date_time")) | col("channel").is_null())
    with pytest.raises(InvalidPlan, match=r"^Filter: unsupported use of now\(\)"):
        BIDS.filter(now().ne(col("date_time")))
    with pytest.raises(PlanTypeError, match=r"now_ms.. is int64, date_time is timestamp"):
        BIDS.filter(now_ms() < col("date_time"))
    assert BIDS.filter(now() < col("date_time") + interval(minutes=5)).is_temporal()


def test_project_join_union_names() -> None:
    j = BIDS.join(BIDS, on=["auction"])
    assert j.desc.names == (
        "auction",
        "bidder",
        "price",
        "channel",
        "date_time",
        "auction_1",
        "bidder_1",
        "price_1",
        "channel_1",
        "date_time_1",
    )
    assert j.equivalences == ((0, 5),)
    with pytest.raises(InvalidPlan, match=r"^Project: duplicate output column 'price'; give"):
        Project(BIDS, (2, 2))
    assert Project(BIDS, (2, 2), ("a", "b")).desc.names == ("a", "b")
    with pytest.raises(PlanTypeError) as e:
        BIDS.join(AUCTIONS, on=[("channel", "id")])
    assert str(e.value) == (
        "Join: equated columns have different types: channel (text), id (int64)"
    )
    with pytest.raises(InvalidPlan, match=r"^Join: a join needs at least 2 inputs, got 1$"):
        Join((BIDS,))
    with pytest.raises(PlanTypeError) as e:
        BIDS.union(AUCTIONS)
    assert str(e.value) == (
        "Union: input 1 has 6 columns (id, item, seller, category, reserve, expires), input 0 "
        "has 5 (auction, bidder, price, channel, date_time)"
    )
    p2 = PEOPLE.project("id", "state")
    a2 = AUCTIONS.project("seller", "item")
    u = p2.union(a2)
    assert u.desc.names == ("id", "state")
    with pytest.raises(PlanTypeError, match=r"^Union: column 1 \('state'\) is text in input 0"):
        p2.union(PEOPLE.project("id", "active"))


def test_reduce_types() -> None:
    r = BIDS.reduce(
        ["auction"],
        n=count(),
        nc=count(col("channel"), distinct=True),
        mean=avg(col("price")),
        chans=string_agg(col("channel"), ","),
    )
    assert str(r.desc) == (
        "(auction int64 not null, n int64 not null, nc int64 not null, mean float64 not null, "
        "chans text)"
    )
    assert r.aggregates[0].is_count_star()
    # Default names come from the functions, deduplicated.
    r2 = Reduce(BIDS, (0,), (max_(ColumnRef(2)), max_(ColumnRef(1))))
    assert r2.desc.names == ("auction", "max", "max_1")


def test_topk_validation() -> None:
    t = BIDS.top_k(["auction"], order_by=[desc("price")], limit=1)
    assert t.order_by == (ColumnOrder(2, desc=True),)
    with pytest.raises(InvalidPlan, match=r"^TopK: limit must be None or an int >= 0, got -1$"):
        TopK(BIDS, (), (), -1)
    with pytest.raises(PlanColumnMissing, match=r"^TopK: order by: column #7 not found"):
        TopK(BIDS, (), (ColumnOrder(7),))


def test_constant_rows_are_validated() -> None:
    d = RelationDesc.of(("k", INT64, False), ("v", TEXT))
    c = Constant((((1, "a"), 2), ((2, None), -1)), d)
    assert c.desc == d
    with pytest.raises(InvalidPlan) as e:
        Constant((((None, "a"), 1),), d)
    assert str(e.value) == (
        "Constant: collection Constant, row 0, column 'k': expected non-null int64, got NULL"
    )
    with pytest.raises(InvalidPlan, match="multiplicity must be a non-zero int, got 0"):
        Constant((((1, "a"), 0),), d)


def test_lit_and_bad_values() -> None:
    assert lit(None, TEXT) == Literal(None, TEXT)
    with pytest.raises(InvalidPlan, match=r"lit.None. needs a type"):
        lit(None)
    with pytest.raises(PlanTypeError, match="literal of type int64: got str 'x'"):
        Literal("x", INT64)
    with pytest.raises(PlanTypeError, match="a bare None has no type"):
        col("price") + None


def test_resolution_is_idempotent() -> None:
    q = BIDS.map(x=col("price") * 0.5, y=col("date_time") + interval(days=2)).filter(
        col("x") > 3, now() >= col("y")
    )
    again = Filter(Map(q.input.input, q.input.scalars, q.input.names), q.predicates)  # type: ignore[attr-defined]
    assert again == q


def test_plans_are_immutable() -> None:
    f = BIDS.filter(col("price") > 1)
    with pytest.raises(AttributeError):
        f.predicates = ()  # type: ignore[misc]
    assert f.desc == BIDS_DESC
    # Lists given to constructors are stored as tuples.
    u = Union([BIDS, BIDS])  # type: ignore[arg-type]
    assert isinstance(u.operands, tuple)


def test_builder_shapes() -> None:
    s = BIDS.select("auction", doubled=col("price") * 2)
    assert (
        isinstance(s, Project) and str(s.desc) == "(auction int64 not null, doubled int64 not null)"
    )
    assert BIDS.select(2, 0).desc.names == ("price", "auction")
    r = BIDS.rename(price="amount")
    assert r.desc.names == ("auction", "bidder", "amount", "channel", "date_time")
    with pytest.raises(PlanColumnMissing, match="column 'cost' not found"):
        BIDS.rename(cost="x")
    t = BIDS.top_k(["auction"], order_by=[desc("price", nulls_last=True), "bidder", 4], limit=2)
    assert t.order_by == (
        ColumnOrder(2, desc=True, nulls_last=True),
        ColumnOrder(1),
        ColumnOrder(4),
    )
    a = BIDS.arrange_by(["auction"], [1, "price"])
    assert a.keys == ((0,), (1, 2))
    assert BIDS.flat_map("generate_series", 1, col("price")).desc.names[-1] == "generate_series"
    e = BIDS.except_all(BIDS.filter(col("price") > 3))
    assert type(e).__name__ == "Threshold"
    c = BIDS.cross_join(AUCTIONS, PEOPLE)
    assert isinstance(c, Join) and len(c.operands) == 3 and c.equivalences == ()
    with pytest.raises(PlanColumnMissing, match=r"^right join column 'nope' not found"):
        BIDS.join(AUCTIONS, on=[("auction", "nope")])


def test_explain_names_columns() -> None:
    q = (
        AUCTIONS.join(BIDS, on=[("id", "auction")])
        .filter(now() < col("date_time") + interval(hours=1))
        .reduce(["category"], top=max_(col("price")), n=count(col("item"), distinct=True))
        .top_k(order_by=[desc("top")], limit=3)
    )
    assert q.explain().splitlines()[:4] == [
        "TopK key=[] order=[top DESC] limit=3 offset=0",
        "  Reduce key=[category] [top = max(price), n = count(DISTINCT item)]",
        "    Filter (now() < timestamp_add_ms(date_time, 3600000))",
        "      Join on [id=auction]",
    ]


def test_nan_literals_are_one_value() -> None:
    import math

    from spate.codec import decode, encode

    a = Literal(math.nan, FLOAT64)
    assert a == Literal(float("nan"), FLOAT64)
    assert decode(encode(a), Literal) == a
