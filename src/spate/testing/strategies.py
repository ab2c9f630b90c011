"""Hypothesis strategies for spate's value types."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
from hypothesis import strategies as st

from spate.frontier.antichain import Antichain, Product
from spate.repr.arrow import updates_to_table
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    JSONB,
    TEXT,
    TIMESTAMP,
    Datum,
    Row,
    ScalarType,
    numeric,
)


def times(max_time: int = 8) -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=max_time)


def products(max_time: int = 8) -> st.SearchStrategy[Product]:
    return st.builds(Product, times(max_time), times(max_time))


def int_antichains(max_time: int = 8) -> st.SearchStrategy[Antichain[int]]:
    return st.lists(times(max_time), max_size=3).map(Antichain)


def product_antichains(max_time: int = 8) -> st.SearchStrategy[Antichain[Product]]:
    return st.lists(products(max_time), max_size=5).map(Antichain)


def scalar_types() -> st.SearchStrategy[ScalarType]:
    simple = st.sampled_from([BOOL, INT64, FLOAT64, TEXT, BYTES, DATE, TIMESTAMP, JSONB])
    nums = st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: numeric(p, s)))
    return st.one_of(simple, nums)


def datums(t: ScalarType) -> st.SearchStrategy[Datum]:
    """Valid, non-NULL values of ``t``."""
    match str(t):
        case "bool":
            return st.booleans()
        case "int64":
            return st.integers(-(2**63), 2**63 - 1)
        case "float64":
            return st.floats(allow_nan=False)
        case "text":  # valid UTF-8 without NUL: what PostgreSQL's text holds and spate accepts
            chars = st.characters(exclude_characters="\x00", exclude_categories=["Cs"])
            return st.text(chars, max_size=8)
        case "bytes":
            return st.binary(max_size=8)
        case "date":
            return st.dates(min_value=dt.date(1970, 1, 1), max_value=dt.date(2200, 1, 1))
        case "timestamp":
            return st.datetimes(
                min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2200, 1, 1)
            )
        case "jsonb":
            return st.sampled_from(['{"a": 1}', "[1, 2]", "null", '"x"', "3.5"])
    assert t.precision is not None and t.scale is not None
    p, s = t.precision, t.scale
    bound = 10 ** (p - s) - 1
    return st.decimals(
        min_value=-bound, max_value=bound, places=s, allow_nan=False, allow_infinity=False
    ).map(lambda d: d if d != 0 else Decimal(0))


def relation_descs(max_columns: int = 4) -> st.SearchStrategy[RelationDesc]:
    return st.lists(st.tuples(scalar_types(), st.booleans()), min_size=1, max_size=max_columns).map(
        lambda cols: RelationDesc(Column(f"c{i}", t, n) for i, (t, n) in enumerate(cols))
    )


def rows(desc: RelationDesc) -> st.SearchStrategy[Row]:
    parts = [
        st.one_of(st.none(), datums(c.type)) if c.nullable else datums(c.type) for c in desc.columns
    ]
    return st.tuples(*parts)


KV_DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT, True))


def kv_updates(
    *, keys: int = 12, values: int = 8, max_time: int = 6, max_size: int = 60
) -> st.SearchStrategy[list[tuple[Row, int, int]]]:
    """``((k, v), time, ±diff)`` streams over a few keys, with insertions and retractions."""
    row = st.tuples(
        st.integers(0, keys - 1), st.one_of(st.none(), st.integers(0, values - 1).map(str))
    )
    update = st.tuples(row, times(max_time), st.integers(-2, 2))
    return st.lists(update, max_size=max_size)


def kv_tables(**kwargs: int) -> st.SearchStrategy[pa.Table]:
    return kv_updates(**kwargs).map(lambda ups: updates_to_table(KV_DESC, ups))
