"""A random collection with a unique key, and how to cut it into intervals (shared by sink tests)."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa

from spate.repr.arrow import updates_to_table
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT, Row

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


def random_updates(rng: random.Random, n_times: int, keys: int = 20) -> list[tuple[Row, int, int]]:
    """Updates at times 0..n_times-1 that keep one row per key (upserts and deletes)."""
    state: dict[int, Row] = {}
    out: list[tuple[Row, int, int]] = []
    for t in range(n_times):
        for _ in range(rng.randint(0, 6)):
            k = rng.randrange(keys)
            old = state.get(k)
            if old is not None:
                out.append((old, t, -1))
                del state[k]
            if old is None or rng.random() < 0.7:
                new = (k, rng.choice(["a", "b", "", None, 'q"uote', "new\nline"]))
                out.append((new, t, 1))
                state[k] = new
    return out


def at(updates: list[tuple[Row, int, int]], time: int) -> Counter[Row]:
    acc: Counter[Row] = Counter()
    for row, t, d in updates:
        if t <= time:
            acc[row] += d
    return +acc


def interval(updates: list[tuple[Row, int, int]], lower: int, upper: int) -> pa.Table:
    return updates_to_table(DESC, [u for u in updates if lower <= u[1] < upper])
