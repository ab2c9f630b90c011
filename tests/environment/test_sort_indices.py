"""ORDER BY sorted by Arrow (:func:`spate.environment.sql_reads.sort_indices`) against the
row comparison that defines it (:func:`spate.plan.evaluation.values.compare_by`): random
tables with NULLs, ties, texts ordered by code point and decimals, random keys, directions
and NULL placements; the same order, ties kept in input order."""

from __future__ import annotations

import functools
import os
import random
from decimal import Decimal

import pyarrow as pa

from spate.environment.sql_reads import sort_indices
from spate.plan.evaluation.values import compare_by
from spate.plan.finishing import ColumnOrder
from spate.repr.arrow import arrow_rows, data_schema
from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL, FLOAT64, INT64, TEXT, numeric

DESC = RelationDesc.of(
    ("i", INT64, True),
    ("t", TEXT, True),
    ("b", BOOL, True),
    ("d", numeric(10, 2), True),
    ("pos", INT64, False),
    ("f", FLOAT64, True),
)
_TEXTS = ["", "a", "B", "b", "ab", "é", "Z", "a b", "zz", "\u00e9a"]


def _row(rng: random.Random, pos: int) -> tuple[object, ...]:
    def maybe(v: object) -> object:
        return None if rng.random() < 0.2 else v

    return (
        maybe(rng.randint(-3, 3)),
        maybe(rng.choice(_TEXTS)),
        maybe(rng.random() < 0.5),
        maybe(Decimal(rng.randint(-300, 300)) / 100),
        pos,
        maybe(rng.choice([0.5, float("nan"), -1.0])),
    )


def test_arrow_sorts_as_the_rows_compare() -> None:
    seed = int(os.environ.get("SPATE_TEST_SEED", random.randrange(2**32)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(200):
        rows = [_row(rng, p) for p in range(rng.randint(0, 40))]
        table = pa.Table.from_pylist(arrow_rows(DESC, rows), schema=data_schema(DESC))
        orders = tuple(
            ColumnOrder(c, desc=rng.random() < 0.5, nulls_last=rng.choice([None, True, False]))
            for c in rng.sample(range(4), rng.randint(1, 3))
        )
        indices = sort_indices(table, DESC, orders)
        assert indices is not None
        got = [rows[i] for i in indices.to_pylist()]

        cmp = functools.partial(compare_by, orders)
        want = sorted(rows, key=functools.cmp_to_key(cmp))  # stable: ties in input order
        assert [r[4] for r in got] == [r[4] for r in want], f"seed {seed}: {orders}"


def test_floats_are_left_to_the_row_comparison() -> None:
    table = pa.Table.from_pylist([], schema=data_schema(DESC))
    assert sort_indices(table, DESC, (ColumnOrder(5),)) is None  # NaN above every number
