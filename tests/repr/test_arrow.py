"""Arrow mapping: rows, schemas and descs round-trip; tables validate vectorised."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from spate.errors import SchemaMismatch
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.arrow import (
    desc_from_schema,
    rows_to_table,
    table_to_rows,
    table_to_updates,
    updates_schema,
    updates_to_table,
    validate_table,
)
from spate.testing.strategies import datums, relation_descs, rows


@settings(max_examples=200)
@given(data=st.data())
def test_rows_round_trip_through_arrow_and_parquet(tmp_path_factory, data: st.DataObject) -> None:
    desc = data.draw(relation_descs())
    rs = data.draw(st.lists(rows(desc), max_size=5))
    desc.validate_rows(rs, collection="u1")
    times = list(range(len(rs)))
    table = rows_to_table(desc, rs, times=times, diffs=[1] * len(rs))
    assert table.schema == updates_schema(desc)
    # Python compares 1 == 1.0 and Decimal("1.5") == Decimal("1.50"): coerced values compare equal.
    assert table_to_rows(table) == rs
    path = tmp_path_factory.mktemp("pq") / "t.parquet"
    pq.write_table(table, path, coerce_timestamps="us")
    back = pq.read_table(path)
    assert desc_from_schema(back.schema) == desc
    assert table_to_updates(back) == table_to_updates(table)


def test_generated_text_values_are_valid_text() -> None:
    """The row strategy draws only values a table accepts: text without NUL and without lone
    surrogates, which are not UTF-8 (either, drawn, made the round trip above fail validation
    now and then)."""
    with pytest.raises(NoSuchExample):
        find(datums(TEXT), lambda s: "\x00" in s, settings=settings(max_examples=2_000))
    with pytest.raises(NoSuchExample):
        find(
            datums(TEXT),
            lambda s: any("\ud800" <= c <= "\udfff" for c in s),
            settings=settings(max_examples=2_000),
        )


def test_validate_table_checks_names_types_and_nulls() -> None:
    desc = RelationDesc.of(("k", INT64, False), ("v", TEXT))
    ok = pa.table({"k": pa.array([1, 2], pa.int32()), "v": ["a", None]})
    out = validate_table(desc, ok, collection="u3")
    assert out.schema.field("k").type == pa.int64()
    with pytest.raises(
        SchemaMismatch, match=r"collection u3: expected columns \(k, v\), got columns \(v, k\)"
    ):
        validate_table(desc, ok.select(["v", "k"]), collection="u3")
    with pytest.raises(
        SchemaMismatch, match="collection u3, row 1, column 'k': expected non-null int64, got NULL"
    ):
        validate_table(desc, pa.table({"k": [1, None], "v": ["a", "b"]}), collection="u3")
    with pytest.raises(SchemaMismatch, match="column 'k': expected int64, got arrow string"):
        validate_table(desc, pa.table({"k": ["x"], "v": ["a"]}), collection="u3")
    with pytest.raises(SchemaMismatch, match="column 'k': expected int64, got arrow double"):
        validate_table(desc, pa.table({"k": [1.5], "v": ["a"]}), collection="u3")


def test_updates_to_table_shape() -> None:
    desc = RelationDesc.of(("k", INT64, False))
    t = updates_to_table(desc, [((1,), 5, 1), ((2,), 6, -1)])
    assert t.column_names == ["k", "_time", "_diff"]
    assert table_to_updates(t) == [((1,), 5, 1), ((2,), 6, -1)]


def test_an_interval_beyond_arrows_nanoseconds_is_a_clear_read_error() -> None:
    """Arrow's month_day_nano_interval holds at most 2**63 - 1 nanoseconds in its time part;
    a larger interval (PostgreSQL allows 2**63 - 1 microseconds) fails as an evaluation error
    naming the value, not as pyarrow's OverflowError."""
    from spate.errors import EvaluationFailed
    from spate.repr.arrow import user_intervals
    from spate.repr.interval import Interval, encode

    fits = Interval(0, 0, (2**63 - 1) // 1000)
    assert user_intervals(pa.array([encode(fits)])).to_pylist()[0].nanoseconds == fits.micros * 1000
    big = Interval(0, 0, 3_000_000 * 3_600_000_000)
    with pytest.raises(EvaluationFailed, match="3000000:00:00") as e:
        user_intervals(pa.array([encode(big), None]))
    assert e.value.sqlstate == "22008"
