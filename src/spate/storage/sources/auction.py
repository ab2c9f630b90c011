"""AUCTION: persons, auctions and bids in the shape of the Nexmark benchmark.

Event ``n`` (0-based) is a person when ``n mod 50 == 0``, an auction when ``n mod 50`` is 1–3,
and a bid otherwise: every 50 events hold 1 person, 3 auctions and 46 bids. Every value of event
``n`` is a pure function of ``(seed, n)``, so the same seed gives the same data in any chunking.

* Person ids and auction ids are dense from 1000, derived from the event number.
* A bid names one of the ~100 newest auctions or an id up to 10 beyond the newest, so **a bid
  may arrive before its auction**; half of all bids go to the hot auction (the newest id rounded
  down to a multiple of 100). Bidders and sellers come from the newest 1000 people (up to 10
  beyond), and 3/4 of them are hot.
* Prices are log-uniform cents from $1 to $1M; auctions expire uniformly 1 .. 2·H after they
  open, H being the event time in which ~100 auctions open.
* Event ``n`` happens at ``base_time + n / rate`` (microseconds, naive timestamps; ``rate`` is
  the pacing, ``per_tick`` events per ``tick_ms``); ``extra``
  pads rows to the Nexmark average sizes (person 200 B, auction 500 B, bid 100 B).

Only insertions: every update has ``_diff = +1``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT, TIMESTAMP
from spate.storage.sources._hash import below, uniform
from spate.storage.sources._strings import choose, digits, fixed_strings, join, varying_strings
from spate.storage.sources.loadgen import LoadGenerator
from spate.storage.sources.source import diff_schema

I64 = npt.NDArray[np.int64]

PERSON_DESC: Final = RelationDesc.of(
    ("id", INT64, False),
    ("name", TEXT, False),
    ("email_address", TEXT, False),
    ("credit_card", TEXT, False),
    ("city", TEXT, False),
    ("state", TEXT, False),
    ("date_time", TIMESTAMP, False),
    ("extra", TEXT, False),
)
AUCTION_DESC: Final = RelationDesc.of(
    ("id", INT64, False),
    ("item_name", TEXT, False),
    ("description", TEXT, False),
    ("initial_bid", INT64, False),
    ("reserve", INT64, False),
    ("date_time", TIMESTAMP, False),
    ("expires", TIMESTAMP, False),
    ("seller", INT64, False),
    ("category", INT64, False),
    ("extra", TEXT, False),
)
BID_DESC: Final = RelationDesc.of(
    ("auction", INT64, False),
    ("bidder", INT64, False),
    ("price", INT64, False),
    ("channel", TEXT, False),
    ("url", TEXT, False),
    ("date_time", TIMESTAMP, False),
    ("extra", TEXT, False),
)

TOTAL_PROPORTION: Final = 50
PERSON_PROPORTION: Final = 1
AUCTION_PROPORTION: Final = 3
FIRST_PERSON_ID: Final = 1000
FIRST_AUCTION_ID: Final = 1000
FIRST_CATEGORY_ID: Final = 10
NUM_CATEGORIES: Final = 5
PERSON_ID_LEAD: Final = 10
AUCTION_ID_LEAD: Final = 10
NUM_ACTIVE_PEOPLE: Final = 1000
NUM_IN_FLIGHT_AUCTIONS: Final = 100
HOT_AUCTION_RATIO: Final = 2
HOT_BIDDER_RATIO: Final = 4
HOT_SELLER_RATIO: Final = 4
HOT_ID_GRANULE: Final = 100

FIRST_NAMES: Final = (
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
)  # fmt: skip
LAST_NAMES: Final = (
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
)  # fmt: skip
US_STATES: Final = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES: Final = (
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
    "Kent", "Cheyenne",
)  # fmt: skip
HOT_CHANNELS: Final = ("Google", "Facebook", "Baidu", "Apple")

DEFAULT_BASE_TIME_US: Final = int(
    (dt.datetime(2024, 1, 1) - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000
)

# Draw streams (one per random choice, so that choices are independent).
_S_NAME1, _S_NAME2, _S_EMAIL1, _S_EMAIL2, _S_CARD, _S_CITY, _S_STATE, _S_EXTRA = range(8)
_S_ITEM, _S_DESC, _S_PRICE1, _S_PRICE2, _S_EXPIRES, _S_SELLER_HOT, _S_SELLER = range(8, 15)
_S_CATEGORY, _S_AUCTION_HOT, _S_AUCTION, _S_BIDDER_HOT, _S_BIDDER, _S_CHANNEL_HOT = range(15, 21)
_S_CHANNEL, _S_URL = range(21, 23)


def last_person(n: I64) -> I64:
    """0-based id of the newest person at event ``n``."""
    epoch, offset = np.divmod(n, TOTAL_PROPORTION)
    return epoch * PERSON_PROPORTION + np.minimum(offset, PERSON_PROPORTION - 1)


def last_auction(n: I64) -> I64:
    """0-based id of the newest auction at event ``n`` (0 before the first auction)."""
    epoch, offset = np.divmod(n, TOTAL_PROPORTION)
    before = offset < PERSON_PROPORTION
    within = (offset >= PERSON_PROPORTION) & (offset < PERSON_PROPORTION + AUCTION_PROPORTION)
    off = np.where(within, offset - PERSON_PROPORTION, AUCTION_PROPORTION - 1)
    ep = np.where(before, epoch - 1, epoch)
    out: I64 = np.maximum(ep * AUCTION_PROPORTION + off, 0).astype(np.int64)
    return out


class AuctionReader(LoadGenerator):
    def __init__(
        self,
        *,
        seed: int = 0,
        tick_ms: int = 1000,
        per_tick: int = 1000,
        base_time_us: int = DEFAULT_BASE_TIME_US,
        max_events: int | None = None,
        max_chunk: int = 100_000,
    ) -> None:
        super().__init__(
            tick_ms=tick_ms, per_tick=per_tick, max_chunk=max_chunk, max_events=max_events
        )
        self._seed = seed
        self._base_time_us = base_time_us
        # Event time advances at the pacing rate: per_tick events every tick_ms.
        self._delay_us = tick_ms * 1000.0 / max(per_tick, 1)

    @property
    def outputs(self) -> Mapping[str, RelationDesc]:
        return {"persons": PERSON_DESC, "auctions": AUCTION_DESC, "bids": BID_DESC}

    def events(self, lower: int, upper: int) -> dict[str, pa.Table]:
        n = np.arange(lower, upper, dtype=np.int64)
        kind = n % TOTAL_PROPORTION
        out = {
            "persons": self._persons(n[kind < PERSON_PROPORTION]),
            "auctions": self._auctions(
                n[(kind >= PERSON_PROPORTION) & (kind < PERSON_PROPORTION + AUCTION_PROPORTION)]
            ),
            "bids": self._bids(n[kind >= PERSON_PROPORTION + AUCTION_PROPORTION]),
        }
        return {k: v for k, v in out.items() if v.num_rows}

    # -- helpers ----------------------------------------------------------------------------

    def _time(self, n: I64) -> pa.Array:
        us = self._base_time_us + (n * self._delay_us).astype(np.int64)
        return pa.array(us, pa.timestamp("us"))

    def _price(self, stream: int, n: I64) -> I64:
        u = uniform(self._seed, stream, n)
        return np.round(np.power(10.0, 6.0 * u) * 100.0).astype(np.int64)

    def _next_person(self, stream: int, n: I64) -> I64:
        num_people = last_person(n) + 1
        active = np.minimum(num_people, NUM_ACTIVE_PEOPLE)
        return num_people - active + below(self._seed, stream, n, active + PERSON_ID_LEAD)

    def _next_auction(self, stream: int, n: I64) -> I64:
        newest = last_auction(n)
        oldest = np.maximum(newest - NUM_IN_FLIGHT_AUCTIONS, 0)
        return oldest + below(self._seed, stream, n, newest - oldest + 1 + AUCTION_ID_LEAD)

    def _table(self, desc: RelationDesc, columns: list[pa.Array]) -> pa.Table:
        ones = pa.array(np.ones(len(columns[0]), dtype=np.int64))
        return pa.Table.from_arrays([*columns, ones], schema=diff_schema(desc))

    # -- the three kinds of event -----------------------------------------------------------

    def _persons(self, n: I64) -> pa.Table:
        s = self._seed
        if len(n) == 0:
            return diff_schema(PERSON_DESC).empty_table()
        name = join(choose(s, _S_NAME1, n, FIRST_NAMES), " ", choose(s, _S_NAME2, n, LAST_NAMES))
        email = join(
            fixed_strings(s, _S_EMAIL1, n, 7), "@", fixed_strings(s, _S_EMAIL2, n, 5), ".com"
        )
        card_groups = [digits(below(s, _S_CARD * 100 + i, n, 10_000), 4) for i in range(4)]
        card = join(card_groups[0], " ", card_groups[1], " ", card_groups[2], " ", card_groups[3])
        return self._table(
            PERSON_DESC,
            [
                pa.array(last_person(n) + FIRST_PERSON_ID),
                name,
                email,
                card,
                choose(s, _S_CITY, n, US_CITIES),
                choose(s, _S_STATE, n, US_STATES),
                self._time(n),
                varying_strings(s, _S_EXTRA, n, 123),
            ],
        )

    def _auctions(self, n: I64) -> pa.Table:
        s = self._seed
        if len(n) == 0:
            return diff_schema(AUCTION_DESC).empty_table()
        initial = self._price(_S_PRICE1, n)
        reserve = initial + self._price(_S_PRICE2, n)
        horizon_us = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION / AUCTION_PROPORTION * self._delay_us
        length_us = 1 + (uniform(s, _S_EXPIRES, n) * (2 * horizon_us - 1)).astype(np.int64)
        opened = self._base_time_us + (n * self._delay_us).astype(np.int64)
        hot_seller = below(s, _S_SELLER_HOT, n, HOT_SELLER_RATIO) > 0
        seller = np.where(
            hot_seller,
            (last_person(n) // HOT_ID_GRANULE) * HOT_ID_GRANULE,
            self._next_person(_S_SELLER, n),
        )
        return self._table(
            AUCTION_DESC,
            [
                pa.array(last_auction(n) + FIRST_AUCTION_ID),
                fixed_strings(s, _S_ITEM, n, 20),
                fixed_strings(s, _S_DESC, n, 100),
                pa.array(initial),
                pa.array(reserve),
                pa.array(opened, pa.timestamp("us")),
                pa.array(opened + length_us, pa.timestamp("us")),
                pa.array(seller + FIRST_PERSON_ID),
                pa.array(FIRST_CATEGORY_ID + below(s, _S_CATEGORY, n, NUM_CATEGORIES)),
                varying_strings(s, _S_EXTRA, n, 324),
            ],
        )

    def _bids(self, n: I64) -> pa.Table:
        s = self._seed
        if len(n) == 0:
            return diff_schema(BID_DESC).empty_table()
        hot_auction = below(s, _S_AUCTION_HOT, n, HOT_AUCTION_RATIO) == 0
        auction = np.where(
            hot_auction,
            (last_auction(n) // HOT_ID_GRANULE) * HOT_ID_GRANULE,
            self._next_auction(_S_AUCTION, n),
        )
        hot_bidder = below(s, _S_BIDDER_HOT, n, HOT_BIDDER_RATIO) > 0
        bidder = np.where(
            hot_bidder,
            (last_person(n) // HOT_ID_GRANULE) * HOT_ID_GRANULE + 1,
            self._next_person(_S_BIDDER, n),
        )
        hot_channel = below(s, _S_CHANNEL_HOT, n, 2) > 0
        channel_no = below(s, _S_CHANNEL, n, 10_000)
        hot_names = choose(s, _S_CHANNEL, n, HOT_CHANNELS)
        cold_names = join("channel-", digits(channel_no, 1))
        channel = pc.if_else(pa.array(hot_channel), hot_names, cold_names)
        url = join(
            "https://www.nexmark.com/",
            fixed_strings(s, _S_URL, n, 5),
            "/",
            fixed_strings(s, _S_URL + 100, n, 5),
            "/item.htm?query=1&channel_id=",
            digits(channel_no, 1),
        )
        return self._table(
            BID_DESC,
            [
                pa.array(auction + FIRST_AUCTION_ID),
                pa.array(bidder + FIRST_PERSON_ID),
                pa.array(self._price(_S_PRICE1, n)),
                channel,
                url,
                self._time(n),
                varying_strings(s, _S_EXTRA, n, 10),
            ],
        )
