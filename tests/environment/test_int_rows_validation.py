"""Rows written to a table of int64 columns are checked in bulk (``tables._validate``): the
result is what the full per-value check gives, and every row the full check refuses is still
refused, naming the same row and column."""

from __future__ import annotations

import random

import pytest

from spate.environment import tables
from spate.environment.catalog import TableItem
from spate.errors import SchemaMismatch
from spate.ids import GlobalId
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.types import Datum

BIDS = RelationDesc.of(("id", INT64, False), ("auction", INT64, False), ("price", INT64, True))


def _item(desc: RelationDesc) -> TableItem:
    return TableItem(name="bids", id=GlobalId.user(1), desc=desc)


def test_plain_int_rows_take_the_bulk_check_and_match_the_full_one() -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    rows: list[tuple[Datum, ...]] = [
        (rng.randrange(-(2**63), 2**63), rng.randrange(100), rng.randrange(2**40))
        for _ in range(500)
    ]
    rows.append((2**63 - 1, -(2**63), 0))
    assert tables._int64_rows(BIDS, rows) is not None
    assert tables._validate(_item(BIDS), rows) == BIDS.validate_rows(rows, collection="bids")


@pytest.mark.parametrize(
    ("bad", "column"),
    [
        ((1, True, 3), "auction"),  # a bool is not an int64
        ((1, 2, 2**63), "price"),  # out of range
        ((1, -(2**63) - 1, 3), "auction"),
        ((1, 2.0, 3), "auction"),
        ((None, 2, 3), "id"),  # NULL in a non-null column
        ((1, 2), None),  # wrong arity
    ],
)
def test_a_row_the_full_check_refuses_is_refused_naming_it(
    bad: tuple[Datum, ...], column: str | None
) -> None:
    rows: list[tuple[Datum, ...]] = [(1, 2, 3), (4, 5, 6), bad, (7, 8, 9)]
    assert tables._int64_rows(BIDS, rows) is None
    with pytest.raises(SchemaMismatch) as e:
        tables._validate(_item(BIDS), rows)
    assert e.value.row_index == 2
    assert e.value.column == column


def test_nullable_lists_and_other_tables_take_the_full_check() -> None:
    assert tables._validate(_item(BIDS), [(1, 2, None)]) == [(1, 2, None)]
    assert tables._validate(_item(BIDS), [[1, 2, 3]]) == [(1, 2, 3)]
    other = RelationDesc.of(("id", INT64, False), ("who", TEXT))
    assert tables._int64_rows(other, [(1, 2)]) is None
    assert tables._validate(_item(other), [(1, "ann")]) == [(1, "ann")]
