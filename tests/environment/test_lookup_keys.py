"""Which key values a literal equality pins a key column to (no JVM, no runtime)."""

from __future__ import annotations

from decimal import Decimal

from spate.environment.lookup import _convert
from spate.plan.expr import Literal
from spate.repr.types import FLOAT64, INT64, TEXT, numeric


def test_int_key_against_wider_numbers() -> None:
    assert _convert(Literal(42.0, FLOAT64), INT64, True) == [42]
    assert _convert(Literal(1.5, FLOAT64), INT64, True) == []
    assert _convert(Literal(Decimal("7.00"), numeric(3, 2)), INT64, True) == [7]
    assert _convert(Literal(Decimal("7.01"), numeric(3, 2)), INT64, True) == []
    # beyond 2**53 several int64 keys cast to the same float64: not a lookup
    assert _convert(Literal(float(2**53), FLOAT64), INT64, True) is None
    assert _convert(Literal(float("nan"), FLOAT64), FLOAT64, False) is None


def test_numeric_key_scale_and_precision() -> None:
    key = numeric(5, 2)
    assert _convert(Literal(Decimal("1.5"), numeric(2, 1)), key, True) == [Decimal("1.50")]
    assert _convert(Literal(Decimal("1.505"), numeric(4, 3)), key, True) == []
    assert _convert(Literal(Decimal("12345.0"), numeric(6, 1)), key, True) == []


def test_same_type_null_and_other_types() -> None:
    assert _convert(Literal("a", TEXT), TEXT, False) == ["a"]
    assert _convert(Literal(None, INT64), INT64, False) == []
    assert _convert(Literal(1.0, FLOAT64), TEXT, True) is None


def test_numeric_beyond_the_decimal_context_is_not_decided_here() -> None:
    big = Decimal("1" * 36 + ".5")
    assert _convert(Literal(big, numeric(37, 1)), numeric(38, 2), True) is None
