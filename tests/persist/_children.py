"""Child processes for persist's multi-process tests (``python -m tests.persist._children``).

``race``: one of several writers racing ``compare_and_append`` on one shard; prints one JSON
line per attempt. ``crash``: a writer that appends numbered rows, with crash points armed from
``SPATE_PERSIST_CRASH_AT``; prints each acknowledged write before going on. ``many``: writers
of several shards appending a numbered row to every shard per round with one batched commit
(``compare_and_append_many``), crash points armed the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

from spate.clock import SystemClock
from spate.frontier.antichain import Antichain
from spate.ids import ShardId, SystemIdGen
from spate.persist import Appended, PersistClient, PersistConfig, PersistLocation
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_to_table

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


def _client(blob: str, consensus: str, **config: object) -> PersistClient:
    return PersistClient(
        PersistLocation.parse(blob, consensus),
        clock=SystemClock(),
        ids=SystemIdGen(),
        config=PersistConfig(**config),  # type: ignore[arg-type]
    )


def race(args: argparse.Namespace) -> None:
    client = _client(args.blob, args.consensus)
    shard = ShardId.parse(args.shard)
    w = client.open_writer(shard, DESC)
    go = Path(args.go)
    while not go.exists():
        time.sleep(0.001)
    out = sys.stdout
    for i in range(args.attempts):
        cur = w.fetch_recent_upper()
        (u,) = cur.elements
        row = args.writer * 1_000_000 + i
        res = w.compare_and_append(
            updates_to_table(DESC, [((row, f"w{args.writer}"), u, 1)]),
            expected_upper=cur,
            new_upper=Antichain.of(u + 1),
            idempotency_token=uuid.uuid4(),
        )
        if isinstance(res, Appended):
            rec = {"row": row, "expected": u, "ack": True}
        else:
            rec = {"row": row, "expected": u, "ack": False, "current": list(res.current.elements)}
        out.write(json.dumps(rec) + "\n")
        out.flush()
    w.expire()
    client.close()


def crash(args: argparse.Namespace) -> None:
    # Eager compaction and GC, so that the crash points in them are reached.
    client = _client(args.blob, args.consensus, gc_every=2, compaction_min_inputs=2)
    shard = ShardId.parse(args.shard)
    w = client.open_writer(shard, DESC)
    r = client.open_leased_reader(shard, DESC)
    for _ in range(args.writes):
        cur = w.fetch_recent_upper()
        (u,) = cur.elements
        token = uuid.uuid4()
        # Announce the attempt first: after a crash the parent knows it may have committed.
        print(json.dumps({"attempt": u, "token": str(token)}), flush=True)
        res = w.compare_and_append(
            updates_to_table(DESC, [((u, "row"), u, 1)]),
            expected_upper=cur,
            new_upper=Antichain.of(u + 1),
            idempotency_token=token,
        )
        print(json.dumps({"ack": u, "ok": isinstance(res, Appended)}), flush=True)
        r.downgrade_since(Antichain.of(max(0, u - 1)))
        # The reader's GC runs on the maintenance thread: one pass per downgrade, as counted
        # by the crash points, not merged with the next.
        client.wait_for_maintenance()
    client.close()


def many(args: argparse.Namespace) -> None:
    from spate.persist.write_many import AppendRequest, compare_and_append_many

    client = _client(args.blob, args.consensus)
    writers = [client.open_writer(ShardId.parse(s), DESC) for s in args.shards.split(",")]
    for u in range(args.writes):
        print(json.dumps({"attempt": u}), flush=True)
        out = compare_and_append_many(
            [
                AppendRequest(
                    w,
                    updates_to_table(DESC, [((u, "row"), u, 1)]),
                    Antichain.of(u),
                    Antichain.of(u + 1),
                    uuid.uuid4(),
                )
                for w in writers
            ]
        )
        assert all(isinstance(o, Appended) for o in out), out
        print(json.dumps({"ack": u}), flush=True)
    client.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("race")
    p.add_argument("--blob", required=True)
    p.add_argument("--consensus", required=True)
    p.add_argument("--shard", required=True)
    p.add_argument("--attempts", type=int, required=True)
    p.add_argument("--writer", type=int, required=True)
    p.add_argument("--go", required=True)
    c = sub.add_parser("crash")
    c.add_argument("--blob", required=True)
    c.add_argument("--consensus", required=True)
    c.add_argument("--shard", required=True)
    c.add_argument("--writes", type=int, required=True)
    m = sub.add_parser("many")
    m.add_argument("--blob", required=True)
    m.add_argument("--consensus", required=True)
    m.add_argument("--shards", required=True)
    m.add_argument("--writes", type=int, required=True)
    args = ap.parse_args()
    {"race": race, "crash": crash, "many": many}[args.cmd](args)


if __name__ == "__main__":
    main()
