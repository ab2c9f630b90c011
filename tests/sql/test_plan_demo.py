"""The demo's view written in SQL plans to the same answers as its Python builder plan."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

from spate.environment.demo import winning_bids_plan
from spate.plan.relation import Get
from spate.sql import MemoryCatalog, plan_statements
from spate.sql import statements as st
from spate.storage.sources.auction import AUCTION_DESC, BID_DESC, PERSON_DESC
from spate.testing.reference import evaluate

WINNING_BIDS_SQL = """
CREATE MATERIALIZED VIEW winning_bids AS
SELECT w.id AS auction, w.item_name AS item, w.price, w.bidder, p.name AS seller, w.category
FROM (
    SELECT DISTINCT ON (a.id) a.id, a.item_name, a.seller, a.category, b.price, b.bidder
    FROM auction_auctions a JOIN auction_bids b ON a.id = b.auction
    WHERE mz_now() < a.expires
    ORDER BY a.id, b.price DESC
) w
JOIN auction_persons p ON w.seller = p.id
"""


class _Env:
    def __init__(self, catalog: MemoryCatalog) -> None:
        self.catalog = catalog

    def get(self, name: str) -> Get:
        obj = self.catalog.items[name]
        assert obj.id is not None and obj.desc is not None
        return Get(obj.id, obj.desc)


def test_the_demo_view_in_sql_equals_the_python_plan(seed: int) -> None:
    rng = random.Random(seed)
    cat = MemoryCatalog()
    persons = cat.add("auction_persons", PERSON_DESC, "subsource")
    auctions = cat.add("auction_auctions", AUCTION_DESC, "subsource")
    bids = cat.add("auction_bids", BID_DESC, "subsource")
    [stmt] = plan_statements(WINNING_BIDS_SQL, cat)
    assert isinstance(stmt, st.CreateView) and stmt.materialized
    python_plan = winning_bids_plan(_Env(cat))  # type: ignore[arg-type]
    assert stmt.plan.desc.names == python_plan.desc.names

    t0 = dt.datetime(2024, 1, 1)
    ts = t0 + dt.timedelta(seconds=1)
    data = {
        persons.id: Counter(
            {(i, f"p{i}", "e", "c", "city", "st", ts, ""): 1 for i in range(5)}
        ),
        auctions.id: Counter(
            {
                (a, f"item{a}", "d", 1, 2, ts, t0 + dt.timedelta(minutes=rng.randint(1, 9)),
                 rng.randrange(5), rng.randrange(3), ""): 1
                for a in range(8)
            }
        ),
        bids.id: Counter(
            {(rng.randrange(9), rng.randrange(5), rng.randint(1, 4), "ch", "u", ts, ""): 1
             for _ in range(40)}
        ),
    }  # fmt: skip
    sizes = []
    for minute in (0, 3, 6, 10):
        at = t0 + dt.timedelta(minutes=minute) - dt.datetime(1970, 1, 1)
        now = int(at.total_seconds() * 1000)
        want = evaluate(python_plan, data, now)  # type: ignore[arg-type]
        got = evaluate(stmt.plan, data, now)  # type: ignore[arg-type]
        assert got == want, (seed, minute)
        sizes.append(sum(want.values()))
    assert sizes[0] > 0 and sizes[-1] == 0  # open auctions at first, all closed at the end
