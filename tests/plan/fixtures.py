"""Small Nexmark-like relations shared by the plan and reference-evaluator tests."""

from __future__ import annotations

from spate.ids import GlobalId
from spate.plan.relation import Get
from spate.repr import BOOL, FLOAT64, INT64, TEXT, TIMESTAMP, RelationDesc

BIDS_ID = GlobalId.user(1)
AUCTIONS_ID = GlobalId.user(2)
PEOPLE_ID = GlobalId.user(3)

BIDS_DESC = RelationDesc.of(
    ("auction", INT64, False),
    ("bidder", INT64, False),
    ("price", INT64, False),
    ("channel", TEXT, True),
    ("date_time", TIMESTAMP, False),
)
AUCTIONS_DESC = RelationDesc.of(
    ("id", INT64, False),
    ("item", TEXT, True),
    ("seller", INT64, False),
    ("category", INT64, False),
    ("reserve", FLOAT64, True),
    ("expires", TIMESTAMP, False),
)
PEOPLE_DESC = RelationDesc.of(
    ("id", INT64, False),
    ("name", TEXT, False),
    ("state", TEXT, True),
    ("active", BOOL, True),
)

BIDS = Get(BIDS_ID, BIDS_DESC)
AUCTIONS = Get(AUCTIONS_ID, AUCTIONS_DESC)
PEOPLE = Get(PEOPLE_ID, PEOPLE_DESC)
