"""The interval functions (spate.plan.interval_funcs) on Spark agree with the reference
evaluator field for field (not just by span): intervals travel as their stored text, the
results are read back as ``Interval`` values; where the reference fails, Spark fails too."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from spate.errors import EvalError
from spate.plan.expr import CallVariadic, ColumnRef, Literal, ScalarExpr, VariadicFunc
from spate.render.scalar import compile_scalar
from spate.repr.arrow import interval_of
from spate.repr.desc import RelationDesc
from spate.repr.interval import Interval, encode
from spate.repr.types import FLOAT64, INT64, INTERVAL, TEXT, TIMESTAMP, Datum, Row, numeric
from tests.plan.test_interval_funcs_pg import _runtime_text
from tests.render.test_scalar_spark import exact_spark, frame, reference_values

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["exact_spark"]

V = VariadicFunc
DESC = RelationDesc.of(
    ("i", INTERVAL), ("f", FLOAT64), ("ts", TIMESTAMP), ("n", numeric(38, 0)), ("t", TEXT)
)
IV, F, TS, N, TXT = (ColumnRef(k) for k in range(5))

EDGE = [
    Interval(0, 0, 0),
    Interval(1, 2, 3_000_000),
    Interval(0, 30, 0),
    Interval(0, 0, 129_600_000_000),
    Interval(-1, 2, -3),
    Interval(0, -1, 7_200_000_000),
    Interval(14, -40, 86_399_999_999),
    Interval(-(2**31), -(2**31), -(2**63)),
    Interval(2**31 - 1, 2**31 - 1, 2**63 - 1),
    Interval(1, -1, 0),
    Interval(-1, 0, 1),
    Interval(1, 0, -1),
    Interval(-1, 35, 3_600_000_000),
    Interval(0, 2**31 - 1, 86_400_000_000),
    Interval(0, -(2**31), -86_400_000_000),
    Interval(2**31 - 1, 30, -1),
    Interval(2**31 - 1, -(2**31), 360_000_000_000),
]
FACTORS = [0.0, 1.0, -1.0, 1.5, 0.3, -2.25, 1e-7, 1e10]
STAMPS = [dt.datetime(2024, 1, 31, 10, 20, 30, 123456), dt.datetime(1, 1, 1), None]
TEXTS = [
    "1 year 2 mons -3 days +04:05:06.5", "-00:00:01", "+5 DAYS", "\t1 day\n", "1 day\u2028",
    "178956971 years", "-178956970 years -9 mons ago", "99999999 century", "2147483 weeks",
    "1 hour 02:00", "1.5 days", "soon", "", "@ 1 Day AGO", "999999999:59:59.999999", None,
]  # fmt: skip


def _rows(rng: random.Random) -> list[Row]:
    out: list[Row] = []
    for k in range(48):
        iv: Interval | None = (
            EDGE[k]
            if k < len(EDGE)
            else Interval(
                rng.randint(-40, 40), rng.randint(-100, 100), rng.randint(-(10**12), 10**12)
            )
        )
        if k == 5:
            iv = None
        span = None if iv is None else Decimal(iv.span())
        text = TEXTS[k] if k < len(TEXTS) else _runtime_text(rng)
        out.append((iv, rng.choice(FACTORS), rng.choice(STAMPS), span, text))
    # the largest interval negated: -2**63 microseconds is still in range
    top = EDGE[-1]
    out.append((top, -1.0, None, Decimal(top.span()), None))
    return out


def _exprs() -> list[ScalarExpr]:
    def call(f: VariadicFunc, *a: ScalarExpr) -> ScalarExpr:
        return CallVariadic(f, a)

    return [
        call(V.INTERVAL_MONTHS, IV),
        call(V.INTERVAL_DAYS, IV),
        call(V.INTERVAL_MICROS, IV),
        call(V.INTERVAL_KEY, IV),
        call(V.INTERVAL_CANON, IV),
        call(V.INTERVAL_OF_KEY, N),
        call(V.INTERVAL_EPOCH, IV),
        call(V.INTERVAL_TEXT, IV),
        call(V.INTERVAL_MUL, IV, F),
        call(V.INTERVAL_DIV, IV, F),
        call(V.TIMESTAMP_ADD_US, TS, call(V.INTERVAL_MICROS, IV)),
        call(V.MAKE_INTERVAL, call(V.INTERVAL_MONTHS, IV), Literal(3, INT64), Literal(-4, INT64)),
        call(V.JUSTIFY_DAYS, IV),
        call(V.JUSTIFY_HOURS, IV),
        call(V.JUSTIFY_INTERVAL, IV),
        call(V.INTERVAL_OF_TEXT, TXT),
    ]


def _same(a: Datum, b: Datum) -> bool:
    if isinstance(a, Interval) and isinstance(b, Interval):
        return tuple(a) == tuple(b)  # the fields, not just the span
    return type(a) is type(b) and a == b if a is not None else b is None


@pytest.mark.timeout(900)
def test_interval_functions_on_spark_agree_with_the_reference(
    exact_spark: SparkSession, seed: int
) -> None:
    from pyspark.sql import functions as fn

    rng = random.Random(seed)
    rows = _rows(rng)
    stored = [
        (*(encode(v) if isinstance(v, Interval) else v for v in r), k) for k, r in enumerate(rows)
    ]
    desc = RelationDesc.of(*((c.name, c.type) for c in DESC.columns), ("k", INT64))
    df = frame(exact_spark, desc, stored)
    exprs = _exprs()
    wanted: list[list[Datum | EvalError]] = []
    columns = []
    failing: list[tuple[ScalarExpr, int]] = []
    for n, e in enumerate(exprs):
        per_row: list[Datum | EvalError] = []
        for r in rows:
            ref = reference_values(DESC, [r], e)
            per_row.append(ref if isinstance(ref, EvalError) else ref[0])
        wanted.append(per_row)
        good = [k for k, v in enumerate(per_row) if not isinstance(v, EvalError)]
        bad = [k for k, v in enumerate(per_row) if isinstance(v, EvalError)]
        if bad:
            failing.append((e, bad[0]))
        compiled = compile_scalar(e, desc)
        columns.append(fn.when(fn.col("c5").isin(good), compiled).alias(f"e{n}"))
    got = {r["c5"]: r for r in df.select("c5", *columns).collect()}
    for n, e in enumerate(exprs):
        for k, want in enumerate(wanted[n]):
            if isinstance(want, EvalError):
                continue
            g = got[k][f"e{n}"]
            value = interval_of(g) if isinstance(want, Interval) and g is not None else g
            assert _same(value, want), f"{e} on {rows[k]}: spark {value!r}, reference {want!r}"
    assert failing, "the edge rows make some function fail"
    for e, k in failing:
        one = df.filter(fn.col("c5") == k).select(compile_scalar(e, desc))
        with pytest.raises(Exception, match=r"SQLSTATE (22|0A)"):
            one.collect()
    # a text's cast fails on Spark with the reference's SQLSTATE (a row of each SQLSTATE)
    text_cast = exprs.index(CallVariadic(V.INTERVAL_OF_TEXT, (TXT,)))
    first: dict[str | None, int] = {}
    for k, want in enumerate(wanted[text_cast]):
        if isinstance(want, EvalError):
            first.setdefault(want.sqlstate, k)
    assert {"0A000", "22007", "22015", "22008"} <= set(first), first
    for k in first.values():
        want = wanted[text_cast][k]
        if isinstance(want, EvalError):
            one = df.filter(fn.col("c5") == k).select(compile_scalar(exprs[text_cast], desc))
            with pytest.raises(Exception, match=f"SQLSTATE {want.sqlstate}"):
                one.collect()


@pytest.mark.parametrize("func", [V.INTERVAL_MUL, V.INTERVAL_DIV])
def test_interval_scaling_compiles_to_a_small_expression(
    exact_spark: SparkSession, func: VariadicFunc
) -> None:
    """Each intermediate of ``interval * float8`` is bound once: with the Column copied into
    each use the expression grew to ~450 kB of text and exhausted the driver's heap."""
    desc = RelationDesc.of(*((c.name, c.type) for c in DESC.columns), ("k", INT64))
    text = compile_scalar(CallVariadic(func, (IV, F)), desc)._jc.toString()
    assert len(text) < 50_000, len(text)
