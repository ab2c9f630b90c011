"""The reference evaluator against hand-computed results on small Nexmark-like data."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from decimal import Decimal

import pytest

from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.plan import (
    EvalError,
    Get,
    avg,
    bool_and,
    bool_or,
    col,
    count,
    desc,
    interval,
    max_,
    min_,
    now,
    now_ms,
    string_agg,
    sum_,
)
from spate.plan.dataflow import BuildDesc, DataflowDescription, IndexDesc, IndexExport, SourceImport
from spate.repr import INT64, TEXT, RelationDesc, Row, numeric
from spate.testing.reference import (
    accumulate,
    evaluate,
    expected_contents,
    expected_updates,
    validity_interval,
)
from tests.plan.fixtures import AUCTIONS, AUCTIONS_ID, BIDS, BIDS_ID, PEOPLE, PEOPLE_ID

EPOCH = dt.datetime(1970, 1, 1)


def at(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


# (auction, bidder, price, channel, date_time)
BID_ROWS: Counter[Row] = Counter(
    {
        (1, 10, 5, "web", at(0)): 1,
        (1, 11, 25, "app", at(1)): 1,
        (1, 12, 25, None, at(2)): 1,
        (2, 10, 40, "web", at(3)): 2,  # the same bid twice
        (2, 13, 12, "web", at(4)): 1,
        (3, 11, 8, None, at(5)): 1,
        (9, 14, 99, "app", at(6)): 1,  # a bid for an auction that does not exist (yet)
    }
)
# (id, item, seller, category, reserve, expires)
AUCTION_ROWS: Counter[Row] = Counter(
    {
        (1, "lamp", 100, 10, 20.0, at(50)): 1,
        (2, "desk", 101, 10, None, at(60)): 1,
        (3, "bike", 100, 11, 5.0, at(70)): 1,
    }
)
# (id, name, state, active)
PEOPLE_ROWS: Counter[Row] = Counter(
    {(100, "ann", "OR", True): 1, (101, "bob", None, None): 1, (102, "cy", "CA", False): 1}
)
INPUTS = {BIDS_ID: BID_ROWS, AUCTIONS_ID: AUCTION_ROWS, PEOPLE_ID: PEOPLE_ROWS}


def run(plan: object, now_ms_: int = 0) -> Counter[Row]:
    return evaluate(plan, INPUTS, now_ms_)  # type: ignore[arg-type]


def test_max_bid_per_auction() -> None:
    q = BIDS.filter(col("price") > 10).reduce(["auction"], top=max_(col("price")))
    assert run(q) == Counter({(1, 25): 1, (2, 40): 1, (9, 99): 1})


def test_join_then_nested_aggregation() -> None:
    """q4-like: the max bid per auction, then the average of those maxima per category."""
    winners = AUCTIONS.join(BIDS, on=[("id", "auction")]).reduce(
        ["id", "category"], best=max_(col("price"))
    )
    assert run(winners) == Counter({(1, 10, 25): 1, (2, 10, 40): 1, (3, 11, 8): 1})
    per_category = winners.reduce(["category"], mean=avg(col("best")), n=count())
    assert run(per_category) == Counter({(10, 32.5, 2): 1, (11, 8.0, 1): 1})


def test_join_multiplicities_and_residual_predicates() -> None:
    j = AUCTIONS.join(BIDS, on=[("id", "auction")], where=[col("price") > col("reserve")])
    got = run(j.project("item", "price"))
    # lamp (reserve 20): bids 25, 25; desk: reserve NULL, so no bid passes; bike (reserve 5): 8.
    assert got == Counter({("lamp", 25): 2, ("bike", 8): 1})
    # The duplicated bid (multiplicity 2) joins with multiplicity 2 · 1.
    j2 = AUCTIONS.join(BIDS, on=[("id", "auction")]).filter(col("price").eq(40))
    assert sum(run(j2).values()) == 2


def test_self_join_and_cross_join() -> None:
    outbid = BIDS.join(BIDS, on=["auction"], where=[col("price") < col("price_1")]).project(
        "bidder", "bidder_1"
    )
    # Auction 1: 5 < 25 (two bids of 25); auction 2: 12 < 40 (multiplicity 2).
    assert run(outbid) == Counter({(10, 11): 1, (10, 12): 1, (13, 10): 2})
    cross = PEOPLE.project("name").cross_join(AUCTIONS.project("item"))
    assert len(run(cross)) == 9 and set(run(cross).values()) == {1}
    # An equivalence over three inputs: NULLs never join.
    triple = PEOPLE.join(AUCTIONS, on=[("id", "seller")]).join(PEOPLE, on=[("state", "state")])
    assert run(triple.project("name", "item", "name_1")) == Counter(
        {("ann", "lamp", "ann"): 1, ("ann", "bike", "ann"): 1}
    )


def test_aggregates() -> None:
    r = BIDS.reduce(
        ["auction"],
        n=count(),
        channels=count(col("channel")),
        distinct_channels=count(col("channel"), distinct=True),
        total=sum_(col("price")),
        distinct_total=sum_(col("price"), distinct=True),
        low=min_(col("channel")),
        mean=avg(col("price")),
        names=string_agg(col("channel"), "+"),
    )
    assert run(r)[(2, 3, 3, 1, 92, 52, "web", 92 / 3, "web+web+web")] == 1
    assert run(r)[(1, 3, 2, 2, 55, 30, "app", 55 / 3, "app+web")] == 1
    assert run(r)[(3, 1, 0, 0, 8, 8, None, 8.0, None)] == 1
    flags = PEOPLE.reduce(all_active=bool_and(col("active")), any_active=bool_or(col("active")))
    assert run(flags) == Counter({(False, True): 1})


def test_global_reduce_of_nothing_has_no_row() -> None:
    empty = BIDS.filter(col("price") > 1000)
    assert run(empty.reduce(n=count())) == Counter()
    assert run(empty.reduce(["auction"], n=count())) == Counter()


def test_top_k() -> None:
    best = BIDS.top_k(["auction"], order_by=[desc("price")], limit=1)
    # Auction 1 has a tie at 25: the whole-row tie-break picks bidder 11 (channel 'app').
    assert run(best) == Counter(
        {
            (1, 11, 25, "app", at(1)): 1,
            (2, 10, 40, "web", at(3)): 1,  # one of the two copies
            (3, 11, 8, None, at(5)): 1,
            (9, 14, 99, "app", at(6)): 1,
        }
    )
    second = BIDS.top_k(["auction"], order_by=[desc("price")], limit=1, offset=1)
    assert run(second.project("auction", "price")) == Counter({(1, 25): 1, (2, 40): 1})
    # NULLs first when descending (PostgreSQL), last when ascending.
    by_channel = BIDS.top_k(order_by=[desc("channel")], limit=2).project("channel")
    assert run(by_channel) == Counter({(None,): 2})
    asc_channel = BIDS.top_k(order_by=["channel"], limit=2).project("channel")
    assert run(asc_channel) == Counter({("app",): 2})
    assert run(BIDS.top_k(limit=0)) == Counter()
    assert run(BIDS.top_k()) == BID_ROWS


def test_flat_map() -> None:
    people = PEOPLE.filter(col("id") < 102)
    series = people.flat_map("generate_series", 1, 3, name="i").project("name", "i")
    assert run(series) == Counter({(n, i): 1 for n in ("ann", "bob") for i in (1, 2, 3)})
    down = people.flat_map("generate_series", 5, 1, -2, name="i").project("i")
    assert run(down) == Counter({(5,): 2, (3,): 2, (1,): 2})
    unnest = people.flat_map("unnest", col("state"), "XX", name="st").project("st")
    assert run(unnest) == Counter({("OR",): 1, (None,): 1, ("XX",): 2})
    pieces = (
        BIDS.filter(col("auction").eq(1))
        .map(tags=col("channel").concat(",x"))
        .flat_map("string_to_table", col("tags"), ",", name="tag")
        .project("tag")
    )
    assert run(pieces) == Counter({("web",): 1, ("app",): 1, ("x",): 2})


def test_multiset_algebra() -> None:
    web = BIDS.filter(col("channel").eq("web"))
    assert run(BIDS.union(web.negate())) == BID_ROWS - run(web)
    assert run(web.negate()) == Counter({r: -m for r, m in run(web).items()})
    assert run(web.project("auction").distinct()) == Counter({(1,): 1, (2,): 1})
    diff = web.project("auction").negate().union(BIDS.project("auction"))
    assert run(diff.threshold()) == Counter({(1,): 2, (3,): 1, (9,): 1})
    assert run(BIDS.project("auction").except_all(web.project("auction"))) == run(diff.threshold())
    assert run(BIDS.arrange_by(["auction"])) == BID_ROWS


def test_filter_keeps_only_true() -> None:
    # channel = 'web' is NULL for NULL channels: those rows are dropped, as with FALSE.
    assert sum(run(BIDS.filter(col("channel").eq("web"))).values()) == 4
    assert sum(run(BIDS.filter(~col("channel").eq("web"))).values()) == 2
    assert sum(run(BIDS.filter(col("channel").is_null())).values()) == 2


def test_reduce_requires_a_multiset() -> None:
    negative = BIDS.negate()
    with pytest.raises(EvalError, match=r"Reduce: input row .* has negative multiplicity -1"):
        run(negative.reduce(["auction"], n=count()))
    with pytest.raises(EvalError, match=r"^Distinct: input row"):
        run(negative.distinct())
    with pytest.raises(EvalError, match=r"^Get: no contents given for u7"):
        evaluate(Get(GlobalId.user(7), RelationDesc.of(("a", INT64))), {}, 0)


def test_input_rows_are_checked_against_the_get() -> None:
    with pytest.raises(Exception, match=r"collection u3, row 0, column 'name'"):
        evaluate(PEOPLE, {PEOPLE_ID: Counter({(1, 2, None, None): 1})}, 0)


# --- temporal filters and whole dataflows ----------------------------------------------------

EVENTS_ID = GlobalId.user(20)
EVENTS = RelationDesc.of(("key", TEXT, False), ("created_ms", INT64, False))


def sliding_window_dataflow() -> DataflowDescription:
    """Events visible for 3 ms after they were created: ``now() < created_ms + 3``."""
    window = Get(EVENTS_ID, EVENTS).filter(
        now_ms() >= col("created_ms"), now_ms() < col("created_ms") + interval(ms=3)
    )
    counts = window.reduce(["key"], n=count())
    view = GlobalId.user(21)
    return DataflowDescription(
        source_imports=(SourceImport(EVENTS_ID, EVENTS),),
        objects_to_build=(BuildDesc(view, counts),),
        index_exports=(IndexExport(GlobalId.user(22), IndexDesc(view, (0,)), counts.desc),),
        as_of=Antichain.of(1),
    )


def test_sliding_window_without_watermarks() -> None:
    df = sliding_window_dataflow()
    df.validate()
    updates = {
        EVENTS_ID: [
            (("a", 0), 0, 1),  # visible [0, 3)
            (("a", 2), 1, 1),  # created in the past of its insertion: visible [2, 5)
            (("b", 9), 2, 1),  # inserted early, visible only from 9: [9, 12)
            (("a", 0), 2, -1),  # retracted at 2, before its window closes
        ]
    }
    contents = expected_contents(df, updates, upper=13)[GlobalId.user(22)]
    assert sorted(contents) == list(range(1, 13))
    assert contents[1] == Counter({("a", 1): 1})
    assert contents[2] == Counter({("a", 1): 1})  # (a,0) retracted, (a,2) now visible
    assert contents[4] == Counter({("a", 1): 1})
    assert contents[5] == Counter()
    assert contents[9] == contents[11] == Counter({("b", 1): 1})
    assert contents[12] == Counter()
    assert expected_updates(df, updates, upper=13)[GlobalId.user(22)] == [
        (("a", 1), 1, 1),
        (("a", 1), 5, -1),
        (("b", 1), 9, 1),
        (("b", 1), 12, -1),
    ]


def test_expected_contents_honours_until_and_as_of() -> None:
    df = sliding_window_dataflow()
    df = dataclasses.replace(df, as_of=Antichain.of(3), until=Antichain.of(6))
    contents = expected_contents(df, {EVENTS_ID: [(("a", 3), 0, 1)]}, upper=100)
    assert sorted(contents[GlobalId.user(22)]) == [3, 4, 5]


def test_validity_interval_of_timestamp_bounds() -> None:
    f = BIDS.filter(
        now() >= col("date_time"), now() < col("date_time") + interval(ms=10), col("price") > 6
    )
    bounds = f.temporal_bounds()
    assert len(bounds.lower) == 1 and len(bounds.upper) == 1 and len(bounds.predicates) == 1
    cols = BIDS.desc.columns
    row = (1, 10, 7, "web", EPOCH + dt.timedelta(milliseconds=4, microseconds=500))
    # now() >= 4.5 ms means t >= 5; now() < 14.5 ms means t <= 14.
    assert validity_interval(bounds, cols, row) == (5, 15)
    assert validity_interval(bounds, cols, (1, 10, 5, "web", at(4))) is None  # price <= 6
    exact = (1, 10, 7, "web", at(4))
    assert validity_interval(bounds, cols, exact) == (4, 14)
    for t in range(0, 20):
        kept = evaluate(f, {BIDS_ID: Counter({row: 1, exact: 1})}, t)
        assert (row in kept) == (5 <= t < 15)
        assert (exact in kept) == (4 <= t < 14)


def test_accumulate() -> None:
    ups = [(("a",), 0, 1), (("a",), 3, -1), (("b",), 2, 2), (("a",), 5, 1)]
    assert accumulate(ups, 2) == Counter({("a",): 1, ("b",): 2})
    assert accumulate(ups, 3) == Counter({("b",): 2})
    assert accumulate(ups, 9) == Counter({("a",): 1, ("b",): 2})


def test_numeric_sums_are_exact() -> None:
    d = RelationDesc.of(("k", INT64, False), ("amount", numeric(38, 2), False))
    g = Get(GlobalId.user(30), d)
    big = Decimal("123456789012345678901234567890123456.78")  # 38 digits
    rows = Counter({(1, big): 2, (1, Decimal("0.01")): 1, (2, Decimal("-0.05")): 3})
    got = evaluate(g.reduce(["k"], s=sum_(col("amount"))), {g.id: rows}, 0)
    # 28-digit default decimal arithmetic would round this sum; the reference must not.
    assert got == Counter(
        {(1, Decimal("246913578024691357802469135780246913.57")): 1, (2, Decimal("-0.15")): 1}
    )
    mean = evaluate(
        g.reduce(["k"], a=avg(col("amount"))),
        {g.id: {(2, Decimal("0.05")): 2, (2, Decimal("0.06")): 1}},
        0,
    )
    # numeric(38, 16): PostgreSQL's 20 digits for an average below 1, capped at the type's 16
    assert mean == Counter({(2, Decimal("0.0533333333333333")): 1})
    with pytest.raises(EvalError, match="numeric overflow in avg"):
        evaluate(g.reduce(["k"], a=avg(col("amount"))), {g.id: rows}, 0)
