"""Load generators: deterministic per seed, independent of chunking, replayable, paced."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest

from spate.repr.arrow import table_to_rows
from spate.repr.desc import DIFF_COLUMN
from spate.storage.sources.auction import FIRST_AUCTION_ID, AuctionReader
from spate.storage.sources.counter import CounterReader
from spate.storage.sources.loadgen import LoadGenerator
from spate.storage.sources.source import SourceError
from spate.storage.sources.tpch import TpchReader


def multiset(tables: list[pa.Table]) -> Counter[tuple[object, ...]]:
    out: Counter[tuple[object, ...]] = Counter()
    for t in tables:
        for row in table_to_rows(t, [*t.column_names]):
            *data, diff = row
            out[tuple(data)] += int(diff)  # type: ignore[call-overload]
    return +out


def chunked(gen: LoadGenerator, upper: int, rng: random.Random) -> dict[str, list[pa.Table]]:
    out: dict[str, list[pa.Table]] = {}
    lower = 0
    while lower < upper:
        step = min(upper, lower + rng.randint(1, max(1, upper // 5)))
        chunk = gen.replay(lower, step)
        assert chunk.upper == step
        for name, table in chunk.updates.items():
            assert table.schema.names[-1] == DIFF_COLUMN
            out.setdefault(name, []).append(table)
        lower = step
    return out


@pytest.mark.parametrize(
    ("make", "events"),
    [
        (lambda: CounterReader(max_cardinality=7), 300),
        (lambda: AuctionReader(seed=3), 2_000),
        (lambda: TpchReader(scale_factor=0.001, seed=5), 400),
    ],
    ids=["counter", "auction", "tpch"],
)
def test_chunking_does_not_change_the_data(make, events, seed: int) -> None:
    rng = random.Random(seed)
    whole = make().replay(0, events)
    parts = chunked(make(), events, rng)
    assert set(parts) == set(whole.updates)
    for name, table in whole.updates.items():
        assert multiset(parts[name]) == multiset([table]), name
        assert table.schema == make().replay(0, events).updates[name].schema


def test_counter_values_and_cardinality() -> None:
    gen = CounterReader(max_cardinality=3)
    acc = multiset([gen.replay(0, 10).updates["counter"]])
    assert acc == Counter({(8,): 1, (9,): 1, (10,): 1})
    plain = multiset([CounterReader().replay(0, 5).updates["counter"]])
    assert plain == Counter({(i,): 1 for i in range(1, 6)})


def test_auction_proportions_ids_and_early_bids() -> None:
    gen = AuctionReader(seed=11)
    n = 5_000
    out = gen.replay(0, n).updates
    assert out["persons"].num_rows == 100
    assert out["auctions"].num_rows == 300
    assert out["bids"].num_rows == 4_600
    assert out["persons"].column("id").to_pylist() == list(range(1000, 1100))
    assert out["auctions"].column("id").to_pylist() == list(range(1000, 1300))
    assert set(out["auctions"].column("category").to_pylist()) <= set(range(10, 15))
    prices = out["bids"].column("price").to_pylist()
    assert min(prices) >= 100 and max(prices) <= 100_000_000
    # A bid may name an auction that has not been generated yet at the bid's event.
    early = 0
    for i in range(0, n, 50):
        chunk = gen.replay(i, i + 50).updates
        newest = max(chunk["auctions"].column("id").to_pylist())
        early += sum(1 for a in chunk["bids"].column("auction").to_pylist() if a > newest)
    assert early > 0
    all_bid_auctions = set(out["bids"].column("auction").to_pylist())
    assert min(all_bid_auctions) >= FIRST_AUCTION_ID
    # Every bidder and seller is a person id at most 10 beyond the newest person.
    assert max(out["bids"].column("bidder").to_pylist()) < 1100 + 10


def test_auction_depends_on_seed_only() -> None:
    a = AuctionReader(seed=1).replay(100, 400).updates
    b = AuctionReader(seed=1, tick_ms=10, per_tick=3).replay(100, 400).updates
    c = AuctionReader(seed=2).replay(100, 400).updates
    assert multiset([a["bids"].drop_columns(["date_time"])]) == multiset(
        [b["bids"].drop_columns(["date_time"])]
    )
    assert a["bids"].column("price") != c["bids"].column("price")


def test_tpch_snapshot_keys_and_changes() -> None:
    gen = TpchReader(scale_factor=0.001, seed=2)
    snap = gen.replay(0, 1).updates
    assert snap["orders"].num_rows == gen.n_orders == 1500
    assert snap["customer"].num_rows == 150 and snap["supplier"].num_rows == 10
    assert snap["partsupp"].num_rows == 4 * snap["part"].num_rows
    parts = set(snap["part"].column("p_partkey").to_pylist())
    partsupp = set(
        zip(
            snap["partsupp"].column("ps_partkey").to_pylist(),
            snap["partsupp"].column("ps_suppkey").to_pylist(),
            strict=True,
        )
    )
    assert len(partsupp) == snap["partsupp"].num_rows  # (part, supplier) is a key
    li = snap["lineitem"]
    pairs = zip(li.column("l_partkey").to_pylist(), li.column("l_suppkey").to_pylist(), strict=True)
    assert all(p in parts and (p, s) in partsupp for p, s in pairs)
    # After 2,000 changes (more than one full generation of 1,500 slots), the accumulated
    # collection still has one row per order key, and line items only for existing orders.
    changes = gen.replay(1, 2_001).updates
    orders = multiset([snap["orders"], changes["orders"]])
    assert all(c == 1 for c in orders.values())
    keys = [row[0] for row in orders]
    assert sorted(keys) == list(range(1, 1501))
    lines = multiset([snap["lineitem"], changes["lineitem"]])
    assert all(c == 1 for c in lines.values())
    assert {row[0] for row in lines} == set(keys)
    # Order 1 changed twice (steps 0 and 1,500): its row differs from the snapshot.
    first = [r for r in orders if r[0] == 1]
    assert first != [r for r in multiset([snap["orders"]]) if r[0] == 1]


def test_pacing_ticks_chunk_and_max_events() -> None:
    gen = CounterReader(tick_ms=100, per_tick=2, max_chunk=5, max_events=12)
    chunk = gen.poll(0, now_millis=1_000)  # the first tick is at the first poll
    assert chunk is not None and chunk.upper == 2
    assert gen.poll(2, now_millis=1_099) is None  # the next tick is due at 1,100
    chunk = gen.poll(2, now_millis=1_100)
    assert chunk is not None and chunk.upper == 4
    chunk = gen.poll(4, now_millis=3_000)
    assert chunk is not None and chunk.upper == 9  # capped at max_chunk
    chunk = gen.poll(9, now_millis=99_000)
    assert chunk is not None and chunk.upper == 12  # capped at max_events
    assert gen.poll(12, now_millis=199_000) is None
    tpch = TpchReader(scale_factor=0.001, per_tick=0)
    first = tpch.poll(0, now_millis=0)
    assert first is not None and first.upper == 1 and "part" in first.updates  # the snapshot
    assert tpch.poll(1, now_millis=10_000) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: CounterReader(tick_ms=0),
        lambda: CounterReader(per_tick=-1),
        lambda: CounterReader(max_cardinality=0),
        lambda: CounterReader(max_chunk=0),
        lambda: TpchReader(scale_factor=2),
    ],
)
def test_bad_options_are_clear_errors(make) -> None:
    with pytest.raises(SourceError, match="must be"):
        make()


def test_progress_rows_round_trip() -> None:
    gen = CounterReader()
    assert gen.point_from_rows(gen.progress_rows(0)) == 0
    assert gen.point_from_rows(gen.progress_rows(42)) == 42
    with pytest.raises(SourceError):
        gen.point_from_rows([(1,), (2,)])
