"""Pipelined table writes (``env.pipeline()``): submitted without waiting, taken in order,
sharing group commits, each acknowledged once durable; checked against a model of the table
under seeded random inserts, updates and deletes (no replicas)."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.errors import RowsNotFound
from spate.repr import INT64, TEXT, RelationDesc

BIDS = RelationDesc.of(("auction", INT64, False), ("price", INT64, False), ("who", TEXT))


def contents(env: Environment, name: str, as_of: int | None = None) -> Counter:
    read = env.select(name) if as_of is None else env.select(name, as_of=as_of)
    return Counter(tuple(r.values()) for r in read.to_pylist())


def test_pipelined_writes_take_effect_in_order_and_share_commits(
    env: Environment, seed: int
) -> None:
    rng = random.Random(seed)
    env.create_table("bids", BIDS)
    model: Counter = Counter()
    groups_before = env.runtime.commits.groups
    expected: list[Counter] = []
    with env.pipeline() as p:
        pending = []
        for i in range(60):
            live = list(model.elements())
            op = rng.choice(["insert", "insert_arrow", "update", "delete"]) if live else "insert"
            if op == "insert":
                rows = [(rng.randrange(5), rng.randrange(100), rng.choice(["a", None]))]
                pending.append(p.insert("bids", rows))
                model.update(rows)
            elif op == "insert_arrow":
                n = rng.randrange(1, 4)
                auctions, prices = [i] * n, [rng.randrange(100) for _ in range(n)]
                t = pa.table({"auction": auctions, "price": prices, "who": ["t"] * n})
                pending.append(p.insert("bids", t))
                model.update((a, b, "t") for a, b in zip(auctions, prices, strict=True))
            elif op == "update":
                old = rng.choice(live)
                new = (old[0], old[1] + 1, old[2])
                pending.append(p.update("bids", [(old, new)]))
                model[old] -= 1
                model[new] += 1
            else:
                old = rng.choice(live)
                pending.append(p.delete("bids", [old]))
                model[old] -= 1
            model = +model
            expected.append(Counter(model))
    results = [w.result() for w in pending]
    assert all(w.done() for w in pending)
    # In order: timestamps never go back, and the table at each write's timestamp is the
    # model after the last write of that timestamp.
    stamps = [r.timestamp for r in results]
    assert stamps == sorted(stamps)
    last_at = {ts: i for i, ts in enumerate(stamps)}
    for ts, i in last_at.items():
        assert contents(env, "bids", as_of=ts) == expected[i], (ts, i)
    assert contents(env, "bids") == model
    # Successive writes shared commits (60 writes, fewer groups).
    assert env.runtime.commits.groups - groups_before < 60


def test_a_failed_write_changes_nothing_and_later_writes_still_happen(env: Environment) -> None:
    env.create_table("bids", BIDS)
    p = env.pipeline()
    first = p.insert("bids", [(1, 10, "ann")])
    missing = p.update("bids", [((9, 9, "nobody"), (9, 10, "nobody"))])
    later = p.update("bids", [((1, 10, "ann"), (1, 11, "ann"))])
    with pytest.raises(RowsNotFound):
        p.wait()
    assert first.result().rows == 1 and later.result().rows == 1
    with pytest.raises(RowsNotFound):
        missing.result()
    assert contents(env, "bids") == Counter({(1, 11, "ann"): 1})
