"""Child processes for the storage controller's crash tests
(``python -m tests.storage.controller._children``).

``txn``: a storage controller on an embedded data directory creates tables ``u1`` (small) and
``u2`` (``--rows`` rows) and appends to both in one call at time 0, advancing them to 1, with
crash points armed from ``SPATE_PERSIST_CRASH_AT``. Prints ``{"ready": …}`` once the tables
exist and ``{"ack": true}`` if the append returned.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from spate.clock import SystemClock
from spate.frontier.antichain import Antichain
from spate.ids import GlobalId, SystemIdGen
from spate.persist import PersistClient, PersistLocation
from spate.storage.controller import CollectionDescription, StorageController, TableSource
from tests.storage.controller._harness import TABLE_DESC

SMALL = GlobalId.user(1)
BIG = GlobalId.user(2)


def big_rows(n: int) -> list[tuple[tuple[int, str], int, int]]:
    return [((i, f"row-{i}"), 0, 1) for i in range(n)]


async def txn(args: argparse.Namespace) -> None:
    persist = PersistClient(
        PersistLocation.embedded(args.data), clock=SystemClock(), ids=SystemIdGen()
    )
    c = StorageController(persist, inline_append_bytes=args.inline_bytes)
    await c.open()
    desc = CollectionDescription(TABLE_DESC, TableSource())
    await c.create_collections([(SMALL, desc), (BIG, desc)])
    c.allow_writes()
    shards = {str(id): str(c.collection_metadata(id).shard) for id in (SMALL, BIG)}
    print(json.dumps({"ready": shards}), flush=True)
    await c.append(
        [
            (SMALL, [((-1, "small"), 0, 1)], Antichain.of(1)),
            (BIG, big_rows(args.rows), Antichain.of(1)),
        ]
    )
    print(json.dumps({"ack": True}), flush=True)
    await c.shutdown()
    persist.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("txn")
    t.add_argument("--data", required=True)
    t.add_argument("--rows", type=int, required=True)
    t.add_argument("--inline-bytes", type=int, required=True)
    args = ap.parse_args()
    asyncio.run({"txn": txn}[args.cmd](args))


if __name__ == "__main__":
    main()
