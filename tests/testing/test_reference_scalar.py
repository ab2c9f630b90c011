"""Scalar semantics of the reference evaluator: SQL NULL tables, arithmetic, strings, time, casts."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from spate.plan import (
    EvalError,
    ScalarExpr,
    case,
    coalesce,
    col,
    from_epoch_ms,
    greatest,
    interval,
    least,
    lit,
    now,
    now_ms,
)
from spate.plan.evaluation.scalar import NAN, eval_scalar
from spate.plan.infer import resolve
from spate.repr import (
    BOOL,
    DATE,
    FLOAT64,
    INT64,
    JSONB,
    TEXT,
    TIMESTAMP,
    Datum,
    RelationDesc,
    numeric,
)

COLS = RelationDesc.of(
    ("i", INT64),
    ("j", INT64),
    ("p", BOOL),
    ("q", BOOL),
    ("s", TEXT),
    ("f", FLOAT64),
    ("g", FLOAT64),
    ("ts", TIMESTAMP),
    ("d", DATE),
    ("n", numeric(10, 2)),
)


def ev(expr: ScalarExpr, now_ms_: int = 0, **values: Datum) -> Datum:
    row = tuple(values.get(name) for name in COLS.names)
    resolved, _ = resolve(expr, COLS.columns)
    return eval_scalar(resolved, COLS.columns, row, now_ms_)


T, F, N = True, False, None
TRUTH = [T, F, N]


@pytest.mark.parametrize("p", TRUTH)
@pytest.mark.parametrize("q", TRUTH)
def test_and_or_three_valued(p: bool | None, q: bool | None) -> None:
    and_table = {
        (T, T): T, (T, F): F, (T, N): N,
        (F, T): F, (F, F): F, (F, N): F,
        (N, T): N, (N, F): F, (N, N): N,
    }  # fmt: skip
    or_table = {
        (T, T): T, (T, F): T, (T, N): T,
        (F, T): T, (F, F): F, (F, N): N,
        (N, T): T, (N, F): N, (N, N): N,
    }  # fmt: skip
    assert ev(col("p") & col("q"), p=p, q=q) is and_table[(p, q)]
    assert ev(col("p") | col("q"), p=p, q=q) is or_table[(p, q)]


@pytest.mark.parametrize(("p", "expected"), [(T, F), (F, T), (N, N)])
def test_not(p: bool | None, expected: bool | None) -> None:
    assert ev(~col("p"), p=p) is expected


def test_null_propagates_through_comparison_and_arithmetic() -> None:
    for e in [
        col("i").eq(col("j")),
        col("i").ne(col("j")),
        col("i") < col("j"),
        col("i") >= col("j"),
        col("i") + col("j"),
        col("i") * 2,
        -col("i"),
        col("s").lower(),
        col("s").concat("x"),
        col("s").like("a%"),
        col("ts").date_trunc("hour"),
    ]:
        assert ev(e, j=1) is None, e  # i, s and ts are NULL
    assert ev(col("i").eq(col("j"))) is None  # NULL = NULL is NULL, not TRUE
    assert ev(col("i").is_null()) is True
    assert ev(col("i").is_null(), i=0) is False
    assert ev(col("i").is_not_null()) is False
    assert ev(col("i").isin(1, 2), i=3) is False
    assert ev(col("i").isin(1, lit(None, INT64)), i=3) is None
    assert ev(col("i").isin(1, lit(None, INT64)), i=1) is True


def test_coalesce_greatest_least_case() -> None:
    assert ev(coalesce(col("i"), col("j"), 7), j=3) == 3
    assert ev(coalesce(col("i"), col("j"))) is None
    assert ev(greatest(col("i"), col("j"), 2), i=5) == 5
    assert ev(least(col("i"), col("j"), 2), i=5) == 2
    assert ev(greatest(col("i"), col("j"))) is None
    # A NULL condition counts as false; no ELSE gives NULL.
    e = case((col("p"), "yes"), (col("q"), "q"), otherwise="no")
    assert ev(e, p=None, q=True) == "q"
    assert ev(e, p=None, q=None) == "no"
    assert ev(case((col("p"), "yes")), p=False) is None


def test_integer_arithmetic() -> None:
    assert ev(col("i") / col("j"), i=7, j=2) == 3
    assert ev(col("i") / col("j"), i=-7, j=2) == -3  # truncates toward zero
    assert ev(col("i") % col("j"), i=-7, j=2) == -1  # sign of the dividend
    assert ev(col("i") % col("j"), i=7, j=-2) == 1
    assert ev(col("i") / col("j"), i=7, j=0) is None
    assert ev(col("i") % col("j"), i=7, j=0) is None
    with pytest.raises(EvalError, match=r"int64 overflow in \(i \* 2\)"):
        ev(col("i") * 2, i=2**62)
    with pytest.raises(EvalError, match="int64 overflow"):
        ev(col("i") / col("j"), i=-(2**63), j=-1)
    assert ev(col("i").abs(), i=-4) == 4


def test_float_and_numeric_arithmetic() -> None:
    assert ev(col("f") / col("g"), f=1.0, g=0.0) is None
    assert ev(col("f") / col("g"), f=1.0, g=4.0) == 0.25
    assert ev(col("i") * 0.5, i=3) == 1.5  # int side cast to float64
    assert ev(col("f") % col("g"), f=7.5, g=2.0) == 1.5
    # NaN equals NaN and sorts above everything; -0.0 equals 0.0.
    assert ev(col("f").eq(col("g")), f=math.nan, g=math.nan) is True
    assert ev(col("f") > col("g"), f=math.nan, g=math.inf) is True
    assert ev(col("f").eq(col("g")), f=-0.0, g=0.0) is True
    assert ev(col("f") * 0.0, f=math.inf) is NAN
    assert ev(col("n") + col("n"), n=Decimal("1.25")) == Decimal("2.50")
    assert ev(col("n") * col("n"), n=Decimal("1.25")) == Decimal("1.5625")
    assert ev(col("n") + 1, n=Decimal("1.25")) == Decimal("2.25")


def test_strings() -> None:
    assert ev(col("s").upper(), s="straße") == "STRASSE"
    assert ev(col("s").length(), s="héllo") == 5
    assert ev(col("s").trim(), s="  a b  ") == "a b"
    assert ev(col("s").concat("!"), s="hi") == "hi!"
    assert ev(col("s").substr(2, 3), s="hello") == "ell"
    assert ev(col("s").substr(0, 2), s="hello") == "h"  # PostgreSQL: start 0 eats one
    assert ev(col("s").substr(-1, 5), s="hello") == "hel"
    assert ev(col("s").substr(3), s="hello") == "llo"
    assert ev(col("s").substr(2, -1), s="hello") is None
    assert ev(col("s").substr(9, 2), s="hello") == ""
    for pattern, text, expected in [
        ("a%", "abc", True),
        ("a%", "bac", False),
        ("%c", "abc", True),
        ("a_c", "abc", True),
        ("a_c", "abbc", False),
        ("100\\%", "100%", True),
        ("100\\%", "1000", False),
        ("a.c", "abc", False),  # regex characters are literal
        ("%", "", True),
        ("A%", "abc", False),
    ]:
        assert ev(col("s").like(pattern), s=text) is expected, (pattern, text)
    assert ev(col("s").ilike("A%"), s="abc") is True


def test_time_functions() -> None:
    ts = dt.datetime(2024, 3, 14, 15, 9, 26, 535_897)  # a Thursday
    assert ev(col("ts").date_trunc("hour"), ts=ts) == dt.datetime(2024, 3, 14, 15)
    assert ev(col("ts").date_trunc("week"), ts=ts) == dt.datetime(2024, 3, 11)
    assert ev(col("ts").date_trunc("quarter"), ts=ts) == dt.datetime(2024, 1, 1)
    assert ev(col("ts").date_trunc("second"), ts=ts) == dt.datetime(2024, 3, 14, 15, 9, 26)
    assert ev(col("d").date_trunc("month"), d=dt.date(2024, 3, 14)) == dt.date(2024, 3, 1)
    assert ev(col("ts").extract("dow"), ts=ts) == 4
    assert ev(col("ts").extract("doy"), ts=ts) == 74
    assert ev(col("ts").extract("week"), ts=ts) == 11
    assert ev(col("ts").extract("second"), ts=ts) == 26
    assert ev(col("ts") + interval(hours=1, ms=5), ts=ts) == ts + dt.timedelta(
        hours=1, milliseconds=5
    )
    assert ev(col("ts") - interval(days=1), ts=ts) == ts - dt.timedelta(days=1)
    assert ev(col("d") + interval(days=2), d=dt.date(2024, 2, 28)) == dt.date(2024, 3, 1)
    assert ev(col("i") + interval(seconds=2), i=5) == 2005  # an int64 ms column
    assert ev(col("ts").epoch_ms(), ts=dt.datetime(1970, 1, 1, 0, 0, 1, 1500)) == 1001
    assert ev(from_epoch_ms(col("i")), i=1500) == dt.datetime(1970, 1, 1, 0, 0, 1, 500_000)
    with pytest.raises(EvalError, match="timestamp out of range"):
        ev(from_epoch_ms(col("i")), i=2**62)


def test_now_is_the_logical_time() -> None:
    assert ev(now_ms(), 1234) == 1234
    assert ev(now(), 1234) == dt.datetime(1970, 1, 1, 0, 0, 1, 234_000)


@pytest.mark.parametrize(
    ("source", "value", "to", "expected"),
    [
        ("i", 3, FLOAT64, 3.0),
        ("i", 3, TEXT, "3"),
        ("i", 2, BOOL, True),
        ("p", True, INT64, 1),
        ("p", False, TEXT, "false"),
        ("f", 2.7, INT64, 2),
        ("f", -2.7, INT64, -2),
        ("f", math.nan, INT64, None),
        ("f", 1e30, INT64, None),
        ("f", 2.675, numeric(5, 2), Decimal("2.68")),
        ("n", Decimal("1.5"), TEXT, "1.50"),
        ("n", Decimal("-1.5"), INT64, -1),
        ("n", Decimal("12345678.91"), numeric(4, 1), None),
        ("s", " 42 ", INT64, 42),
        ("s", "4.2", INT64, None),
        ("s", "1_000", INT64, None),
        ("s", "4.25", numeric(4, 1), Decimal("4.3")),
        ("s", "1e3", FLOAT64, 1000.0),
        ("s", "x", FLOAT64, None),
        ("s", "Yes", BOOL, True),
        ("s", "maybe", BOOL, None),
        ("s", "2024-02-29", DATE, dt.date(2024, 2, 29)),
        ("s", "2023-02-29", DATE, None),
        ("s", "2024-02-29 10:00:01.5", TIMESTAMP, dt.datetime(2024, 2, 29, 10, 0, 1, 500_000)),
        ("s", "[1, 2]", JSONB, "[1, 2]"),
        ("s", "[1, 2", JSONB, None),
        ("ts", dt.datetime(2024, 1, 2, 3, 4, 5, 600_000), TEXT, "2024-01-02 03:04:05.6"),
        ("ts", dt.datetime(2024, 1, 2, 3, 4, 5), DATE, dt.date(2024, 1, 2)),
        ("d", dt.date(2024, 1, 2), TIMESTAMP, dt.datetime(2024, 1, 2)),
        ("d", dt.date(2024, 1, 2), TEXT, "2024-01-02"),
    ],
)
def test_casts(source: str, value: Datum, to: object, expected: Datum) -> None:
    got = ev(col(source).cast(to), **{source: value})  # type: ignore[arg-type]
    assert got == expected and type(got) is type(expected)
