"""Row validation: every bad row is rejected with an exact message."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from spate.errors import ColumnMissing, InvalidRelationDesc, SchemaMismatch
from spate.repr import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    JSONB,
    TEXT,
    TIMESTAMP,
    Column,
    RelationDesc,
    ScalarType,
    numeric,
)
from spate.repr.types import InvalidScalarType

DESC = RelationDesc.of(
    ("id", INT64, False),
    ("name", TEXT),
    ("price", numeric(5, 2)),
    ("ok", BOOL),
    ("ratio", FLOAT64),
    ("blob", BYTES),
    ("day", DATE),
    ("at", TIMESTAMP),
    ("doc", JSONB),
)
GOOD = (
    1,
    "a",
    Decimal("123.45"),
    True,
    0.5,
    b"x",
    dt.date(2024, 1, 2),
    dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    '{"k": 1}',
)


def _with(column: str, value: object) -> tuple:
    row = list(GOOD)
    row[DESC.index_of(column)] = value
    return tuple(row)


BAD_ROWS = [
    (
        (1, "a"),
        "collection u7, row 1: expected 9 values (id, name, price, ok, ratio, blob, day, at, doc), got 2 values",
    ),
    (
        (*GOOD, 1),
        "collection u7, row 1: expected 9 values (id, name, price, ok, ratio, blob, day, at, doc), got 10 values",
    ),
    (_with("id", None), "collection u7, row 1, column 'id': expected non-null int64, got NULL"),
    (_with("id", "3"), "collection u7, row 1, column 'id': expected int64, got str '3'"),
    (_with("id", True), "collection u7, row 1, column 'id': expected int64, got bool True"),
    (
        _with("id", 2**63),
        "collection u7, row 1, column 'id': expected int64, got int 9223372036854775808 (out of range for int64)",
    ),
    (_with("id", 1.0), "collection u7, row 1, column 'id': expected int64, got float 1.0"),
    (_with("name", 5), "collection u7, row 1, column 'name': expected text, got int 5"),
    (
        _with("price", Decimal("1234.5")),
        "collection u7, row 1, column 'price': expected numeric(5,2), got Decimal Decimal('1234.5') (out of range: 4 integer digits, at most 3)",
    ),
    (
        _with("price", Decimal("1.234")),
        "collection u7, row 1, column 'price': expected numeric(5,2), got Decimal Decimal('1.234') (out of range: 3 fractional digits, at most 2)",
    ),
    (
        _with("price", Decimal("NaN")),
        "collection u7, row 1, column 'price': expected numeric(5,2), got Decimal Decimal('NaN') (not a finite number)",
    ),
    (
        _with("price", 1.5),
        "collection u7, row 1, column 'price': expected numeric(5,2), got float 1.5",
    ),
    (_with("ok", 1), "collection u7, row 1, column 'ok': expected bool, got int 1"),
    (
        _with("ratio", "0.5"),
        "collection u7, row 1, column 'ratio': expected float64, got str '0.5'",
    ),
    (_with("blob", "x"), "collection u7, row 1, column 'blob': expected bytes, got str 'x'"),
    (
        _with("day", dt.datetime(2024, 1, 2)),
        "collection u7, row 1, column 'day': expected date, got datetime datetime.datetime(2024, 1, 2, 0, 0)",
    ),
    (
        _with("at", dt.date(2024, 1, 2)),
        "collection u7, row 1, column 'at': expected timestamp, got date datetime.date(2024, 1, 2)",
    ),
    (
        _with("at", dt.datetime(2024, 1, 2, tzinfo=dt.UTC)),
        "collection u7, row 1, column 'at': expected timestamp, got datetime datetime.datetime(2024, 1, 2, 0, 0, tzinfo=datetime.timez... (has a time zone; timestamp is naive)",
    ),
    (
        _with("doc", "{nope"),
        "collection u7, row 1, column 'doc': expected jsonb, got str '{nope' (not valid JSON)",
    ),
    (
        [1, 2],
        "collection u7, row 1: expected 9 values (id, name, price, ok, ratio, blob, day, at, doc), got 2 values",
    ),
    (
        "abc",
        "collection u7, row 1: expected a tuple of 9 values (id, name, price, ok, ratio, blob, day, at, doc), got str",
    ),
]


@pytest.mark.parametrize(("bad", "message"), BAD_ROWS)
def test_bad_row_is_rejected_with_exact_message(bad: object, message: str) -> None:
    with pytest.raises(SchemaMismatch) as info:
        DESC.validate_rows([GOOD, bad], collection="u7")  # type: ignore[list-item]
    assert str(info.value) == message
    assert info.value.collection == "u7"
    assert info.value.row_index == 1
    assert isinstance(info.value, TypeError)


def test_good_rows_pass_and_equivalents_are_accepted() -> None:
    rows = DESC.validate_rows(
        [
            GOOD,
            _with("price", 7),
            _with("price", Decimal("1.50")),
            _with("ratio", 3),
            _with("name", None),
        ],
        collection="u7",
    )
    assert len(rows) == 5 and all(isinstance(r, tuple) for r in rows)


def test_desc_rules() -> None:
    with pytest.raises(InvalidRelationDesc, match="duplicate column name 'a'"):
        RelationDesc.of(("a", INT64), ("a", TEXT))
    with pytest.raises(InvalidRelationDesc, match="reserved"):
        RelationDesc.of(("_time", INT64))
    with pytest.raises(InvalidRelationDesc, match="non-empty"):
        RelationDesc([Column("", INT64)])
    with pytest.raises(ColumnMissing) as info:
        DESC.index_of("nope")
    assert (
        str(info.value)
        == "column 'nope' not found; columns: id, name, price, ok, ratio, blob, day, at, doc"
    )
    assert isinstance(info.value, KeyError)


def test_scalar_type_parse_round_trip() -> None:
    for t in [
        BOOL,
        INT64,
        FLOAT64,
        TEXT,
        BYTES,
        DATE,
        TIMESTAMP,
        JSONB,
        numeric(38, 0),
        numeric(10, 3),
    ]:
        assert ScalarType.parse(str(t)) == t
    with pytest.raises(InvalidScalarType, match="unknown scalar type 'varchar'"):
        ScalarType.parse("varchar")
    with pytest.raises(InvalidScalarType, match=r"precision must be in 1\.\.38"):
        numeric(39, 0)
    with pytest.raises(InvalidScalarType, match=r"scale must be in 0\.\.5"):
        numeric(5, 6)
