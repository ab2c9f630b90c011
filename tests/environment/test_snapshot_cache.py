"""Reads here reuse the contents last read of a shard while its parts are unchanged: every
answer still equals a fresh read (after inserts, deletes, at older timestamps, in joins)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spate.environment import small_reads
from spate.environment.api import Environment
from spate.environment.small_reads import SnapshotCache, complete_key
from spate.frontier.antichain import Antichain
from spate.persist.state import BatchPart, HollowBatch


def _batch(lower: int, upper: int, key: str) -> HollowBatch:
    part = BatchPart(key, 1, 1, b"")
    return HollowBatch(Antichain.of(lower), Antichain.of(upper), Antichain.of(0), (part,))


def test_a_key_only_for_batches_complete_at_the_timestamp() -> None:
    batches = [_batch(0, 5, "a"), _batch(5, 9, "b")]
    assert complete_key(batches, 8) == ("a", "b")
    assert complete_key(batches, 20) == ("a", "b")
    assert complete_key(batches, 7) is None  # "b" may hold updates at 8
    cache = SnapshotCache(max_shards=2)
    shard_1, shard_2, shard_3 = (object() for _ in range(3))
    cache.put(shard_1, ("a",), Counter({(1,): 1}))  # type: ignore[arg-type]
    assert cache.get(shard_1, ("a",)) == Counter({(1,): 1})  # type: ignore[arg-type]
    assert cache.get(shard_1, ("a", "b")) is None  # type: ignore[arg-type]
    assert cache.get(shard_1, None) is None  # type: ignore[arg-type]
    cache.put(shard_2, ("b",), Counter())  # type: ignore[arg-type]
    cache.put(shard_3, ("c",), Counter())  # type: ignore[arg-type]
    assert cache.get(shard_1, ("a",)) is None  # the oldest went  # type: ignore[arg-type]


def test_the_cache_keeps_a_bounded_number_of_rows_and_their_tables() -> None:
    cache = SnapshotCache(max_shards=10, max_rows=5)
    shard_1, shard_2 = object(), object()
    three = Counter({(i,): 1 for i in range(3)})
    cache.put(shard_1, ("a",), three)  # type: ignore[arg-type]
    cache.put_table(shard_1, ("a",), pa.table({"0": [0, 1, 2], "_n": [1, 1, 1]}))  # type: ignore[arg-type]
    assert cache.get_table(shard_1, ("a",)) is not None  # type: ignore[arg-type]
    assert cache.get_table(shard_1, ("b",)) is None  # type: ignore[arg-type]
    cache.put(shard_2, ("b",), Counter(three))  # type: ignore[arg-type]
    assert cache.get(shard_1, ("a",)) is None  # 6 rows > 5: the oldest went  # type: ignore[arg-type]
    assert cache.get_table(shard_1, ("a",)) is None  # and its table  # type: ignore[arg-type]
    assert cache.get(shard_2, ("b",)) == three  # type: ignore[arg-type]


def _rows(env: Environment, sql: str) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r.values()) for r in env.sql(sql).to_pylist())


def test_cached_reads_equal_fresh_reads_through_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = random.SystemRandom().randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    fetched: list[int] = []
    read = small_reads._read_snapshots

    def counting(*a: Any, **k: Any) -> Any:
        fetched.append(1)
        return read(*a, **k)

    monkeypatch.setattr(small_reads, "_read_snapshots", counting)
    with Environment.open(tmp_path / "data") as env:  # no cluster: every read is here
        env.sql("CREATE TABLE a (k bigint, v bigint); CREATE TABLE b (k bigint, w text)")
        env.set_retain_history("a", 3_600_000)  # AS OF the earlier steps below
        model_a: Counter[tuple[Any, ...]] = Counter()
        model_b: Counter[tuple[Any, ...]] = Counter()
        history: list[tuple[int, Counter[tuple[Any, ...]]]] = []
        for step in range(12):
            k = rng.randrange(5)
            if rng.random() < 0.7 or not model_a:
                env.sql(f"INSERT INTO a VALUES ({k}, {step})")
                model_a[(k, step)] += 1
                if rng.random() < 0.5:
                    env.sql(f"INSERT INTO b VALUES ({k}, 'w{step}')")
                    model_b[(k, f"w{step}")] += 1
            else:
                env.sql(f"DELETE FROM a WHERE k = {k}")
                for row in [r for r in model_a if r[0] == k]:
                    del model_a[row]
            for _ in range(2):  # the second read of unchanged tables fetches nothing
                before = len(fetched)
                assert _rows(env, "SELECT * FROM a") == model_a
                assert _rows(env, "SELECT k, v FROM a WHERE v >= 0") == model_a
                for key in (k, (k + 1) % 5):  # through a hash index of the cached contents
                    want = Counter({r: n for r, n in model_a.items() if r[0] == key})
                    assert _rows(env, f"SELECT * FROM a WHERE k = {key}") == want
                    assert _rows(env, f"SELECT v FROM a WHERE k IN ({key}, 7)") == Counter(
                        {(r[1],): n for r, n in want.items()}
                    )
                joined = Counter(
                    (ka, v, w)
                    for (ka, v), n in model_a.items()
                    for (kb, w), m in model_b.items()
                    if ka == kb
                    for _ in range(n * m)
                )
                got = _rows(env, "SELECT a.k, a.v, b.w FROM a JOIN b ON a.k = b.k")
                assert got == joined
            assert len(fetched) == before  # the second round was served from the cache
            ts = env.runtime.oracle.read_ts()
            history.append((ts, Counter(model_a)))
        for ts, contents in rng.sample(history, 4):  # older timestamps: what was there then
            assert _rows(env, f"SELECT * FROM a AS OF {ts}") == contents
