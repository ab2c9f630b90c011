"""Integer literals are typed as PostgreSQL types them: an integer if the value fits, else a
bigint if it fits, else a numeric, with the minus signs in front of the literal (through
parentheses) folded into it first. ``-(-2147483648)`` is the bigint 2147483648 (it used to fail
as an integer overflow), ``-9223372036854775808`` a bigint (it was a numeric)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from spate.errors import EvalError
from spate.repr.types import ScalarKind
from spate.sql.errors import SqlError
from tests.sql._plan_engine import ReferenceEngine

CASES = [
    ("-(-2147483648)", 2147483648),
    ("-(-(-2147483648))", -2147483648),
    ("-(2147483648)", -2147483648),
    ("-(-2147483648) + 1", 2147483649),  # a bigint: no integer overflow
    ("-9223372036854775808", -9223372036854775808),
    ("-(-9223372036854775808)", Decimal("9223372036854775808")),
    ("-(-(5))", 5),
    ("- 1.5", Decimal("-1.5")),
]


@pytest.mark.parametrize(("expr", "value"), CASES, ids=[c[0] for c in CASES])
def test_folded_literal_has_postgres_value(expr: str, value: object) -> None:
    assert ReferenceEngine().rows(f"SELECT {expr}") == [(value,)]


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("-(2147483648) - 1", "integer out of range"),  # -2147483648 is an integer
        ("-9223372036854775808 - 1", "overflow"),  # a bigint, not a numeric
    ],
)
def test_folded_literal_has_postgres_type(expr: str, message: str) -> None:
    with pytest.raises(EvalError, match=message) as caught:
        ReferenceEngine().rows(f"SELECT {expr}")
    assert caught.value.sqlstate == "22003"


def test_bigint_minimum_is_a_bigint_column() -> None:
    engine = ReferenceEngine()
    engine.sql("CREATE VIEW v AS SELECT -9223372036854775808 AS m")
    found = engine.catalog.lookup("v")
    assert found is not None and found.desc is not None
    assert found.desc.columns[0].type.kind is ScalarKind.INT64


@pytest.mark.parametrize(
    "expr", ["-(-2147483648)", "-(2147483648) - 1", "-9223372036854775808 - 1", "-(-(5))"]
)
def test_agrees_with_postgres(expr: str, postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        try:
            expected: object = conn.execute(f"SELECT {expr}").fetchall()
        except psycopg.Error as e:
            expected = e.sqlstate
    try:
        got: object = [tuple(r) for r in ReferenceEngine().rows(f"SELECT {expr}")]
    except EvalError as e:
        got = e.sqlstate
    assert got == expected


CAST_OUT_OF_RANGE = [
    # the cast binds before the minus: -(9223372036854775808::bigint), a numeric too large
    "-9223372036854775808::bigint",
    "-(9223372036854775808::bigint)",
    "9223372036854775808::int",
    "9223372036854775808::smallint",
    "-9223372036854775808.5::bigint",
    "1e19::bigint",
]


@pytest.mark.parametrize("expr", CAST_OUT_OF_RANGE)
def test_a_numeric_constant_cast_beyond_bigint_is_out_of_range(expr: str) -> None:
    with pytest.raises(SqlError, match=" out of range") as caught:
        ReferenceEngine().rows(f"SELECT {expr}")
    assert caught.value.sqlstate == "22003"  # was 42804: a literal of type int64 out of range


@pytest.mark.parametrize(
    "expr",
    [
        *CAST_OUT_OF_RANGE,
        "-9223372036854775808",
        "(-9223372036854775808)::bigint",
        "9223372036854775807.4::bigint",
    ],
)
def test_casts_of_constants_near_the_bigint_bounds_agree_with_postgres(
    expr: str, postgres_url: str
) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        try:
            expected: object = [tuple(r) for r in conn.execute(f"SELECT {expr}").fetchall()]
        except psycopg.Error as e:
            expected = (e.sqlstate, e.diag.message_primary)
    try:
        got: object = [tuple(r) for r in ReferenceEngine().rows(f"SELECT {expr}")]
    except SqlError as e:
        got = (e.sqlstate, e.message)
    assert got == expected
