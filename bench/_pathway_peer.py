"""The Pathway peer of ``bench/e2e.py``, run inside Pathway's own virtual environment (it
imports only Pathway and pyarrow, never spate).

    python _pathway_peer.py DIR STEPS MARKER_AUCTION

``DIR`` holds ``bids.parquet`` and ``auctions.parquet`` (the load) and, for each step ``k`` in
``1..2*STEPS``, ``new-k``, ``old-k`` and ``repl-k.parquet``: 500 new bids, and 500 bids replaced
(``old`` retracted, ``repl`` added), the marker bid (on auction ``MARKER_AUCTION``) priced
``10**12 + k`` among the replacements. The view is the highest bid per auction joined with its
auction, observed with ``pw.io.subscribe``. Steps ``1..STEPS`` go one at a time (write ->
visible: until the marker's new price is seen), the rest back to back (sustained). Prints one
JSON object: the figures and the final view.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pathway as pw
import pyarrow.parquet as pq

DIR, STEPS, MARKER = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])


class Bid(pw.Schema):
    bid: int = pw.column_definition(primary_key=True)  # "id" is Pathway's own row id
    auction: int
    bidder: int
    price: int


class Auction(pw.Schema):
    aid: int = pw.column_definition(primary_key=True)
    seller: int
    category: str


def rows(name: str, key: str) -> list[dict[str, Any]]:
    table = pq.read_table(DIR / name)
    return table.rename_columns([key if c == "id" else c for c in table.column_names]).to_pylist()


marker_top = -1
final: dict[Any, dict[str, Any]] = {}
cond = threading.Condition()


def on_change(key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
    global marker_top
    with cond:
        if is_addition:
            final[key] = row
            if row["auction"] == MARKER:
                marker_top = max(marker_top, row["top"])
        elif final.get(key) == row:
            del final[key]
        cond.notify_all()


def seen(price: int) -> float:
    with cond:
        while marker_top < price:
            cond.wait(1.0)
    return time.perf_counter()


class Bids(pw.io.python.ConnectorSubject):
    def __init__(self) -> None:
        super().__init__(session_type="upsert")
        self.figures: dict[str, float] = {}

    def run(self) -> None:
        t0 = time.perf_counter()
        load = rows("bids.parquet", "bid")
        for r in load:
            self.next(**r)
        seen(max(r["price"] for r in load if r["auction"] == MARKER))
        self.figures["load_s"] = time.perf_counter() - t0
        visible: list[float] = []
        sustained_from = 0.0
        for k in range(1, 2 * STEPS + 1):
            t = time.perf_counter()
            if k == STEPS + 1:
                sustained_from = t
            for r in rows(f"old-{k}.parquet", "bid"):
                self._remove_inner(None, r)
            for name in ("new", "repl"):
                for r in rows(f"{name}-{k}.parquet", "bid"):
                    self.next(**r)
            if k <= STEPS:
                visible.append(seen(10**12 + k) - t)
        seen(10**12 + 2 * STEPS)
        self.figures["sustained_updates_per_s"] = (
            STEPS * 1000 / (time.perf_counter() - sustained_from)
        )
        visible.sort()
        self.figures["visible_p50_ms"] = visible[len(visible) // 2] * 1000
        self.figures["visible_p99_ms"] = visible[round(0.99 * (len(visible) - 1))] * 1000


class Auctions(pw.io.python.ConnectorSubject):
    def run(self) -> None:
        for r in rows("auctions.parquet", "aid"):
            self.next(**r)


subject = Bids()
bids = pw.io.python.read(subject, schema=Bid, autocommit_duration_ms=10)
auctions = pw.io.python.read(Auctions(), schema=Auction, autocommit_duration_ms=10)
best = bids.groupby(pw.this.auction).reduce(pw.this.auction, top=pw.reducers.max(pw.this.price))
view = best.join(auctions, best.auction == auctions.aid).select(
    best.auction, best.top, auctions.seller, auctions.category
)
pw.io.subscribe(view, on_change=on_change)
pw.run(monitoring_level=pw.MonitoringLevel.NONE)
out: dict[str, Any] = dict(subject.figures)
out["final"] = sorted([r["auction"], r["top"], r["seller"], r["category"]] for r in final.values())
print(json.dumps(out))
