"""The numpy equi-join on one integer key (driver_join._int_join) against pyarrow's hash
join: the same rows on seeded random tables with repeated keys on both sides, keys on one
side only, and empty sides; keys it does not join (text, NULLs, two columns) are left to
pyarrow.

Replay a failure with ``SPATE_TEST_SEED=<seed printed> pytest tests/render/test_driver_join_ints.py``.
"""

from __future__ import annotations

import os
import random

import pyarrow as pa

from spate.render.operators.driver_join import _int_join

SEED = int(os.environ.get("SPATE_TEST_SEED", random.randrange(2**32)))


def _rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def test_integer_key_join_equals_the_hash_join() -> None:
    print(f"SPATE_TEST_SEED={SEED}")
    rng = random.Random(SEED)
    for _ in range(200):
        n, m = rng.randint(0, 30), rng.randint(0, 30)
        left = pa.table(
            {
                "k": pa.array([rng.randint(-3, 6) for _ in range(n)], pa.int64()),
                "x": pa.array(range(n), pa.int64()),
            }
        )
        right = pa.table(
            {
                "j": pa.array([rng.randint(0, 9) for _ in range(m)], pa.int64()),
                "y": pa.array([str(i) for i in range(m)], pa.string()),
            }
        )
        got = _int_join(left, right, ["k"], ["j"])
        want = left.join(
            right, keys=["k"], right_keys=["j"], join_type="inner", coalesce_keys=False
        )
        assert got is not None
        assert got.column_names == ["k", "x", "j", "y"]
        assert _rows(got) == _rows(want.select(got.column_names))


def test_other_keys_are_left_to_the_hash_join() -> None:
    text = pa.table({"k": ["a"], "x": [1]})
    ints = pa.table({"k": pa.array([1, None], pa.int64()), "x": [1, 2]})
    other = pa.table({"j": [1], "y": [2]})
    assert _int_join(text, pa.table({"j": ["a"], "y": [2]}), ["k"], ["j"]) is None
    assert _int_join(ints, other, ["k"], ["j"]) is None
    assert _int_join(ints, other, ["k", "x"], ["j", "y"]) is None
