"""The fixed-signature functions (spate.plan.funcs) on Spark agree with the reference evaluator.

Every function runs over rows of edge values (NULL, empty text, Unicode, NaN, infinities,
month ends, leap days) and over seeded random rows (the seed is printed); a function the
reference raises on must raise in Spark too. Math functions whose Java and C library results
may differ in the last bit are compared to 14 significant digits.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from spate.plan.errors import EvalError
from spate.plan.evaluation.scalar import canonical_row
from spate.plan.evaluation.scalar import compile_scalar as reference_compile
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Cast,
    ColumnRef,
    Literal,
    ScalarExpr,
    VariadicFunc,
    show,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import DATE, FLOAT64, INT64, TEXT, TIMESTAMP, Datum, Row, numeric
from tests.render.test_scalar_spark import check, exact_spark, spark_eval

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["exact_spark"]

V = VariadicFunc
DESC = RelationDesc.of(
    ("s", TEXT),
    ("u", TEXT),
    ("i", INT64),
    ("j", INT64),
    ("f", FLOAT64),
    ("g", FLOAT64),
    ("d", DATE),
    ("ts", TIMESTAMP),
    ("n", numeric(38, 10)),
    ("m", numeric(38, 0)),
)
POS = {name: k for k, name in enumerate(DESC.names)}


def c(name: str) -> ColumnRef:
    return ColumnRef(POS[name])


def t(v: str) -> Literal:
    return Literal(v, TEXT)


def n(v: int) -> Literal:
    return Literal(v, INT64)


def call(f: VariadicFunc, *args: ScalarExpr) -> ScalarExpr:
    return CallVariadic(f, args)


TEXTS = ["", " ", "hello world", "Hello-wORLD x2y", "a,b,,c", "ééß", "  pad  ", "xxyxx", "l+"]
INTS = [0, 1, 2, -1, -3, 5, 65, 233, 0x1F600, 12]
FLOATS = [0.0, -0.0, 1.0, 2.5, -2.5, 16.0, 0.125, 100.0, math.inf, -math.inf, math.nan, 1e300]
DATES = [dt.date(2024, 1, 31), dt.date(2024, 2, 29), dt.date(1, 1, 1), dt.date(9999, 12, 31)]
STAMPS = [
    dt.datetime(2024, 1, 31, 10, 20, 30, 123456),
    dt.datetime(2023, 12, 31, 0, 0, 0),
    dt.datetime(2024, 2, 29, 23, 59, 59, 500000),
    dt.datetime(2024, 7, 4, 12, 5, 6),
]
NUMS = [Decimal("1"), Decimal("3"), Decimal("-2.5"), Decimal("0.0001"), Decimal("12345.6789")]
WIDE = [Decimal(30000), Decimal(-7), Decimal(1), Decimal(10) ** 20, Decimal(0)]


def edge_rows() -> list[Row]:
    rows: list[Row] = []
    for k in range(max(len(TEXTS), len(FLOATS))):
        rows.append(
            (
                TEXTS[k % len(TEXTS)],
                TEXTS[(k * 3 + 1) % len(TEXTS)],
                INTS[k % len(INTS)],
                INTS[(k + 4) % len(INTS)],
                FLOATS[k % len(FLOATS)],
                FLOATS[(k * 5 + 2) % len(FLOATS)],
                DATES[k % len(DATES)],
                STAMPS[k % len(STAMPS)],
                NUMS[k % len(NUMS)],
                WIDE[k % len(WIDE)],
            )
        )
    rows.append((None,) * len(DESC.columns))
    return rows


def random_rows(rng: random.Random, count: int) -> list[Row]:
    alphabet = "ab, lL-é1"

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))

    return [
        (
            text(),
            text(),
            rng.randrange(-4, 8),
            rng.randrange(-3, 40),
            rng.choice([rng.uniform(-50, 50), rng.randrange(-5, 6) / 2]),
            rng.uniform(-3, 3),
            dt.date(2000, 1, 1) + dt.timedelta(days=rng.randrange(10000)),
            dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rng.randrange(10**9)),
            Decimal(rng.randrange(-(10**8), 10**8)).scaleb(-rng.randrange(0, 10)),
            Decimal(rng.choice([1, -1]) * rng.randrange(1, 10**12)),
        )
        for _ in range(count)
    ]


EXACT: list[ScalarExpr] = [
    call(V.REPLACE, c("s"), t("l"), t("L")),
    call(V.REPLACE, c("s"), c("u"), t("<>")),
    call(V.STRPOS, c("s"), t("o")),
    call(V.STRPOS, c("s"), c("u")),
    call(V.LPAD, c("s"), c("j"), t("*-")),
    call(V.RPAD, c("s"), n(5), t(".")),
    call(V.LPAD, c("s"), n(3), t("")),
    call(V.SPLIT_PART, c("s"), t(","), n(2)),
    call(V.SPLIT_PART, c("s"), t(" "), n(-1)),
    call(V.SPLIT_PART, c("s"), t(""), n(1)),
    call(V.SPLIT_PART, c("s"), c("u"), c("i")),
    call(V.REPEAT, c("s"), c("i")),
    call(V.REVERSE, c("s")),
    call(V.INITCAP, c("s")),
    call(V.MD5, c("s")),
    call(V.TRANSLATE, c("s"), t("lo"), t("0")),
    call(V.ASCII, c("s")),
    call(V.CHR, c("j")),
    call(V.BTRIM, c("s"), t(" xp")),
    call(V.LTRIM, c("s"), t("xh ")),
    call(V.RTRIM, c("s"), c("u")),
    call(V.OCTET_LENGTH, c("s")),
    call(V.REGEXP_LIKE, c("s"), t("l+")),
    call(V.REGEXP_LIKE, c("s"), t("(?i)^h")),
    call(V.REGEXP_REPLACE, c("s"), t("(l+)(o?)"), t("<\\2\\1\\&>")),
    call(V.REGEXP_REPLACE_ALL, c("s"), t("[aeiou]"), t("$\\\\")),
    call(V.MAKE_DATE, n(2024), c("i"), c("j")),
    call(V.ADD_MONTHS, c("d"), c("j")),
    call(V.ADD_MONTHS, c("ts"), c("i")),
    call(V.TO_CHAR, c("ts"), t('YYYY-MM-DD HH24:MI:SS.US "at" HH12 am Mon Day Dy FMDD DDD Q')),
    call(V.TO_CHAR, c("d"), t("YYYY/MM MONTH month MS YY D")),
    call(V.SQRT, c("f")),
    call(V.FLOAT4, c("f")),
    call(V.FLOAT4_TEXT, c("f")),
    call(V.FLOAT4_TEXT, c("g")),
    call(V.INT4_RANGE, c("i")),
    call(V.INT4_RANGE, CallBinary(BinaryFunc.MUL, c("j"), Literal(1 << 29, INT64))),
    call(V.INT2_RANGE, c("j")),
    Cast(c("f"), TEXT),
    Cast(c("g"), TEXT),
    call(V.LN, c("f")),
    call(V.LOG10, c("g")),
]
APPROX: list[ScalarExpr] = [
    call(V.CBRT, c("f")),
    call(V.EXP, c("f")),
    call(V.POWER, c("f"), c("g")),
    call(V.POWER, c("g"), Literal(2.0, FLOAT64)),
]


def reference(rows: list[Row], e: ScalarExpr) -> list[Datum] | None:
    fn = reference_compile(e, DESC.columns)
    try:
        return [fn(canonical_row(r, DESC.columns), 0) for r in rows]
    except EvalError:
        return None


def close(a: Datum, b: Datum) -> bool:
    if a is None or b is None:
        return a is None and b is None
    assert isinstance(a, float) and isinstance(b, float)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-14)


def check_approx(spark: SparkSession, rows: list[Row]) -> None:
    for e in APPROX:
        want = reference(rows, e)
        if want is None:  # raises on some row: Spark must raise there, agree elsewhere
            bad = [r for r in rows if reference([r], e) is None]
            with pytest.raises(Exception):  # noqa: B017, PT011  # any Spark error
                spark_eval(spark, DESC, bad[:1], [e])
            rows_ok = [r for r in rows if r not in bad]
            want_ok = reference(rows_ok, e)
            assert want_ok is not None
            got = spark_eval(spark, DESC, rows_ok, [e])
            for k, r in enumerate(rows_ok):
                assert close(got[k][0], want_ok[k]), f"{show(e, DESC.names)} on {r}: {got[k][0]}"
            continue
        got = spark_eval(spark, DESC, rows, [e])
        for k, r in enumerate(rows):
            assert close(got[k][0], want[k]), f"{show(e, DESC.names)} on {r}: {got[k][0]}"


@pytest.mark.timeout(1200)
def test_edge_rows_match_reference(exact_spark: SparkSession) -> None:
    rows = edge_rows()
    check(exact_spark, DESC, rows, EXACT, max_failing=len(EXACT))
    check_approx(exact_spark, rows)


@pytest.mark.timeout(1200)
def test_random_rows_match_reference(exact_spark: SparkSession, seed: int) -> None:
    rows = random_rows(random.Random(seed), 30)
    check(exact_spark, DESC, rows, EXACT, max_failing=len(EXACT))
    check_approx(exact_spark, rows)


def test_numeric_math_matches_reference(exact_spark: SparkSession, seed: int) -> None:
    """PostgreSQL's numeric sqrt/exp/ln/log/power on Spark (a Python UDF running the
    reference's code) give the reference's values, and fail where it fails."""

    rng = random.Random(seed)
    desc = RelationDesc.of(("x", numeric(38, 10)), ("y", numeric(8, 3)))
    rows: list[Row] = [
        (Decimal("2"), Decimal("0.500")),
        (Decimal("0.0000000001"), Decimal("-2.000")),
        (Decimal("1"), Decimal("3.455")),
        (Decimal("12345678.9"), Decimal("0.001")),
        (None, Decimal("1.000")),
        (Decimal("0"), Decimal("0.000")),
    ]
    for _ in range(20):
        x = Decimal(rng.randrange(1, 10**12)).scaleb(-rng.randrange(0, 11))
        rows.append((x, Decimal(rng.randrange(-5000, 5000)).scaleb(-3)))
    x, y = ColumnRef(0), ColumnRef(1)
    exprs: list[ScalarExpr] = [
        call(V.NUMERIC_SQRT, x),
        call(V.NUMERIC_SQRT, y),
        call(V.NUMERIC_EXP, y),
        call(V.NUMERIC_LN, x),
        call(V.NUMERIC_LN, y),
        call(V.NUMERIC_LOG, Literal(Decimal(10), numeric(2, 0)), x),
        call(V.NUMERIC_LOG, y, x),
        call(V.NUMERIC_POWER, x, y),
        call(V.NUMERIC_POWER, y, Literal(Decimal(3), numeric(1, 0))),
    ]
    for e in exprs:
        fn = reference_compile(e, desc.columns)
        ok: list[tuple[Row, Datum]] = []
        bad: list[Row] = []
        for r in rows:
            try:
                ok.append((r, fn(canonical_row(r, desc.columns), 0)))
            except EvalError:
                bad.append(r)
        got = spark_eval(exact_spark, desc, [r for r, _ in ok], [e])
        for (r, want), g in zip(ok, got, strict=True):
            assert g[0] == want, f"{show(e, desc.names)} on {r}: spark {g[0]}, reference {want}"
        for r in bad[:2]:
            with pytest.raises(Exception):  # noqa: B017, PT011  # any Spark error
                spark_eval(exact_spark, desc, [r], [e])
