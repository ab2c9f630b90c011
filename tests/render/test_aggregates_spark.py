"""aggregate_column on Spark agrees with spate.testing.reference.aggregate.

Randomised: hypothesis draws consolidated rows (each distinct row once, multiplicity 1..5) in a
few groups; one Spark ``groupBy().agg()`` computes every aggregate of a fixed catalogue (every
function, plain and DISTINCT, over every applicable type). Floats are small dyadic values (plus
NaN and +inf) so that every partial sum is exact: Spark's summation order then cannot matter
(see the module docs of spate.render.aggregates for inexact sums).
``SPATE_SPARK_EXAMPLES=<n>`` raises the number of random examples (nightly runs).
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from spate.plan.aggregate import AggregateExpr, AggregateFunc, aggregate_type
from spate.plan.errors import EvalError
from spate.plan.evaluation.scalar import NAN, canonical_row
from spate.plan.evaluation.scalar import compile_scalar as reference_compile
from spate.plan.expr import BinaryFunc, CallBinary, Cast, ColumnRef, Literal
from spate.plan.infer import typ
from spate.render.aggregates import aggregate_column
from spate.render.layout import col_name
from spate.render.scalar import EXACT_DECIMAL_CONF
from spate.repr.desc import RelationDesc
from spate.repr.spark import spark_type
from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    INT64_MAX,
    TEXT,
    TIMESTAMP,
    Datum,
    Row,
    ScalarKind,
    numeric,
)
from spate.testing.reference import aggregate

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

K = ScalarKind
F_ = AggregateFunc
DESC = RelationDesc.of(
    ("g", INT64),
    ("x", INT64),
    ("f", FLOAT64),
    ("n", numeric(10, 2)),
    ("s", TEXT),
    ("p", BOOL),
    ("d", DATE),
    ("ts", TIMESTAMP),
    ("b", BYTES),
)
POS = {name: i for i, name in enumerate(DESC.names)}


def c(name: str) -> ColumnRef:
    return ColumnRef(POS[name])


def catalogue() -> list[AggregateExpr]:
    out = [AggregateExpr(F_.COUNT, Literal(True, BOOL))]
    for name in DESC.names[1:]:
        out.append(AggregateExpr(F_.COUNT, c(name)))
        out.append(AggregateExpr(F_.COUNT, c(name), distinct=True))
        if name not in ("p",):
            out += [AggregateExpr(F_.MIN, c(name)), AggregateExpr(F_.MAX, c(name))]
    for name in ("x", "f", "n"):
        for func in (F_.SUM, F_.AVG):
            out += [AggregateExpr(func, c(name)), AggregateExpr(func, c(name), distinct=True)]
    out += [
        AggregateExpr(F_.SUM, CallBinary(BinaryFunc.MUL, c("x"), Literal(3, INT64))),
        AggregateExpr(F_.BOOL_AND, c("p")),
        AggregateExpr(F_.BOOL_OR, c("p")),
        AggregateExpr(F_.STRING_AGG, c("s"), delimiter=","),
        AggregateExpr(F_.STRING_AGG, c("s"), distinct=True, delimiter=" | "),
    ]
    return out


CATALOGUE = catalogue()
PLAIN = [a for a in CATALOGUE if not a.distinct]
DISTINCT = [a for a in CATALOGUE if a.distinct]


@pytest.fixture(scope="module")
def exact_spark(spark: SparkSession) -> Iterator[SparkSession]:
    old = {k: spark.conf.get(k) for k in EXACT_DECIMAL_CONF}
    for k, v in EXACT_DECIMAL_CONF.items():
        spark.conf.set(k, v)
    yield spark
    for k, v in old.items():
        spark.conf.set(k, v)


def out_type(agg: AggregateExpr) -> Any:
    return aggregate_type(agg.func, typ(agg.expr, DESC.columns)).type


def spark_aggregate(
    spark: SparkSession, rows: Sequence[tuple[Row, int]], aggs: Sequence[AggregateExpr]
) -> dict[Datum, tuple[Datum, ...]]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = [
        T.StructField(col_name(i), spark_type(col.type), True) for i, col in enumerate(DESC.columns)
    ]
    fields.append(T.StructField("_diff", T.LongType(), False))
    df = spark.createDataFrame([(*r, m) for r, m in rows], T.StructType(fields))
    cols = [aggregate_column(a, DESC, out_type(a)).alias(f"a{k}") for k, a in enumerate(aggs)]
    out = df.groupBy(F.col("c0")).agg(*cols).collect()
    return {r[0]: tuple(bytes(v) if isinstance(v, bytearray) else v for v in r[1:]) for r in out}


def reference_groups(
    rows: Sequence[tuple[Row, int]], agg: AggregateExpr
) -> dict[Datum, Datum] | EvalError:
    fn = reference_compile(agg.expr, DESC.columns)
    groups: dict[Datum, list[tuple[Datum, int]]] = defaultdict(list)
    try:
        for r, m in rows:
            groups[r[0]].append((fn(canonical_row(r, DESC.columns), 0), m))
        return {g: aggregate(agg, pairs, out_type(agg)) for g, pairs in groups.items()}
    except EvalError as e:
        return e


def same(a: Datum, b: Datum) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, float) and isinstance(b, float)):
            return False
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return type(a) is type(b) and a == b


def check(
    spark: SparkSession, rows: Sequence[tuple[Row, int]], aggs: Sequence[AggregateExpr]
) -> None:
    ok: list[tuple[AggregateExpr, dict[Datum, Datum]]] = []
    failing: list[AggregateExpr] = []
    for a in aggs:
        ref = reference_groups(rows, a)
        if isinstance(ref, EvalError):
            failing.append(a)
        else:
            ok.append((a, ref))
    if ok:
        got = spark_aggregate(spark, rows, [a for a, _ in ok])
        assert set(got) == set(ok[0][1])
        bad = [
            f"{a.func.value}({'DISTINCT ' if a.distinct else ''}{a.expr}) group {g}: "
            f"spark {got[g][k]!r}, reference {want!r}"
            for k, (a, ref) in enumerate(ok)
            for g, want in ref.items()
            if not same(got[g][k], want)
        ]
        assert not bad, "\n".join(bad[:10]) + f"\nrows: {list(rows)}"
    for a in failing[:1]:
        with pytest.raises(Exception, match=r"(?i)overflow|out of range|cannot be represented"):
            spark_aggregate(spark, rows, [a])


# --- random rows -------------------------------------------------------------------------------

FLOATS = st.one_of(
    st.integers(-12, 12).map(lambda n: n / 4), st.sampled_from([NAN, math.inf, -0.0])
)
INTS = st.one_of(st.integers(-50, 50), st.sampled_from([INT64_MAX, 2**62, -(2**62)]))
TEXTS = st.sampled_from(["", "a", "b", "B", "ab", "é", "a,b", "Z z"])
DATES = st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))
TIMES = st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31))
NUMS = st.integers(-9_999_999_999, 9_999_999_999).map(lambda n: Decimal(n).scaleb(-2))


def nullable(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), s)


ROW = st.tuples(
    st.integers(0, 3),
    nullable(INTS),
    nullable(FLOATS),
    nullable(NUMS),
    nullable(TEXTS),
    nullable(st.booleans()),
    nullable(DATES),
    nullable(TIMES),
    nullable(st.binary(max_size=3)),
)


@st.composite
def consolidated(draw: st.DrawFn) -> list[tuple[Row, int]]:
    rows = draw(st.lists(ROW, min_size=1, max_size=30, unique_by=lambda r: repr(r)))
    return [(r, draw(st.integers(1, 5))) for r in rows]


@settings(
    max_examples=int(os.environ.get("SPATE_SPARK_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    print_blob=True,
)
@given(
    rows=consolidated(),
    distinct=st.lists(st.sampled_from(DISTINCT), min_size=1, max_size=2, unique_by=repr),
)
def test_random_groups_match_reference(
    exact_spark: SparkSession, rows: list[tuple[Row, int]], distinct: list[AggregateExpr]
) -> None:
    # Every DISTINCT aggregate adds an Expand of all rows to Spark's plan: two per example.
    check(exact_spark, rows, [*PLAIN, *distinct])


# --- targeted cases ----------------------------------------------------------------------------


def row(g: int, **values: Datum) -> Row:
    return tuple([g, *(values.get(name) for name in DESC.names[1:])])


def test_edge_cases(exact_spark: SparkSession) -> None:
    rows = [
        # group 0: string_agg order and multiplicity, distinct values, NULLs skipped
        (row(0, s="b", x=2, f=0.5, n=Decimal("1.01"), p=True), 2),
        (row(0, s="a", x=2, f=NAN, n=Decimal("0.01"), p=False), 1),
        (row(0, s="é", x=-1, f=-0.0, n=Decimal("-1.00")), 1),
        (row(0, s="B", f=0.0), 3),
        (row(0), 4),
        # group 1: only NULLs — counts 0, everything else NULL
        (row(1), 3),
        # group 2: avg rounding (1/3 and numeric half up)
        (row(2, x=1, n=Decimal("0.01"), f=1.0), 1),
        (row(2, x=0, n=Decimal("0.00"), f=0.0), 2),
    ]
    aggs = {
        "string_agg": AggregateExpr(F_.STRING_AGG, c("s"), delimiter=","),
        "string_agg_distinct": AggregateExpr(F_.STRING_AGG, c("s"), distinct=True, delimiter=""),
        "count_star": AggregateExpr(F_.COUNT, Literal(True, BOOL)),
        "count_s": AggregateExpr(F_.COUNT, c("s")),
        "count_distinct_f": AggregateExpr(F_.COUNT, c("f"), distinct=True),
        "sum_x": AggregateExpr(F_.SUM, c("x")),
        "sum_distinct_x": AggregateExpr(F_.SUM, c("x"), distinct=True),
        "avg_x": AggregateExpr(F_.AVG, c("x")),
        "avg_n": AggregateExpr(F_.AVG, c("n")),
        "sum_n": AggregateExpr(F_.SUM, c("n")),
        "max_f": AggregateExpr(F_.MAX, c("f")),
        "min_f": AggregateExpr(F_.MIN, c("f")),
        "bool_and": AggregateExpr(F_.BOOL_AND, c("p")),
        "bool_or": AggregateExpr(F_.BOOL_OR, c("p")),
    }
    want = {
        "string_agg": {0: "B,B,B,a,b,b,é", 1: None, 2: None},
        "string_agg_distinct": {0: "Babé", 1: None},
        "count_star": {0: 11, 1: 3, 2: 3},
        "count_s": {0: 7, 1: 0, 2: 0},
        "count_distinct_f": {0: 3, 1: 0, 2: 2},
        "sum_x": {0: 5, 1: None, 2: 1},
        "sum_distinct_x": {0: 1, 2: 1},
        "avg_x": {0: 1.25, 2: 1 / 3},
        "avg_n": {0: Decimal("0.2575"), 2: Decimal("0.0033333333333333")},
        "sum_n": {0: Decimal("1.03"), 1: None},
        "max_f": {0: NAN, 1: None},
        "min_f": {0: 0.0, 2: 0.0},
        "bool_and": {0: False, 1: None},
        "bool_or": {0: True, 1: None},
    }
    for name, agg in aggs.items():
        ref = reference_groups(rows, agg)
        assert not isinstance(ref, EvalError)
        for g, w in want[name].items():
            assert same(ref[g], w), (name, g, ref[g], w)
    check(exact_spark, rows, list(aggs.values()))


@pytest.mark.parametrize(
    ("agg", "values"),
    [
        (AggregateExpr(F_.SUM, c("x")), [(INT64_MAX, 1), (1, 1)]),
        (AggregateExpr(F_.SUM, c("x")), [(2**62, 2)]),
        (AggregateExpr(F_.SUM, Cast(c("x"), numeric(38, 0))), [(INT64_MAX, INT64_MAX)] * 2),
    ],
)
def test_sum_overflow_raises(
    exact_spark: SparkSession, agg: AggregateExpr, values: list[tuple[Datum, int]]
) -> None:
    rows = [(row(0, x=v, s=str(k)), m) for k, (v, m) in enumerate(values)]
    assert isinstance(reference_groups(rows, agg), EvalError)
    check(exact_spark, rows, [agg])


def test_sum_survives_intermediate_overflow(exact_spark: SparkSession) -> None:
    """The reference sums without bound and checks only the total; so must Spark."""
    rows = [(row(0, x=INT64_MAX, s="a"), 2), (row(0, x=-INT64_MAX, s="b"), 2), (row(0, x=5), 1)]
    check(exact_spark, rows, [AggregateExpr(F_.SUM, c("x")), AggregateExpr(F_.AVG, c("x"))])


def test_result_types(exact_spark: SparkSession) -> None:
    from pyspark.sql import types as T

    rows = [(row(0, x=1, n=Decimal("1.00")), 1)]
    aggs = [
        AggregateExpr(F_.AVG, c("n")),
        AggregateExpr(F_.SUM, c("n")),
        AggregateExpr(F_.AVG, c("x")),
    ]
    df = exact_spark.createDataFrame(
        [(*r, m) for r, m in rows],
        T.StructType(
            [T.StructField(col_name(i), spark_type(col.type)) for i, col in enumerate(DESC.columns)]
            + [T.StructField("_diff", T.LongType())]
        ),
    )
    out = df.groupBy("c0").agg(*[aggregate_column(a, DESC, out_type(a)) for a in aggs])
    assert [f.dataType for f in out.schema.fields[1:]] == [
        T.DecimalType(38, 16),
        T.DecimalType(38, 2),
        T.DoubleType(),
    ]
    assert out_type(aggs[0]) == numeric(38, 16) and out_type(aggs[2]) == FLOAT64


def test_average_rounding(exact_spark: SparkSession) -> None:
    """int64 avg is the correctly rounded double of the exact ratio; numeric avg rounds half
    away from zero at PostgreSQL's result scale (capped at the type's max(s, 16)), also for sums
    beyond 2**53 and ties."""
    rows = [
        (row(0, x=2**62 + 1, s="a"), 3),
        (row(0, x=7, s="b"), 1),
        (row(1, x=-(2**63), s="a"), 3),
        (row(2, n=Decimal("-0.01"), s="a"), 1),
        (row(2, n=Decimal("0.00"), s="b"), 19_999),
        (row(3, n=Decimal("0.01"), x=1, s="a"), 1),
        (row(3, n=Decimal("0.00"), x=2, s="b"), 19_999),
        (row(4, n=Decimal("99999999.99"), x=INT64_MAX, s="a"), INT64_MAX // 4),
        (row(4, n=Decimal("-99999999.99"), x=-1, s="b"), 1),
    ]
    aggs = [AggregateExpr(F_.AVG, c("x")), AggregateExpr(F_.AVG, c("n"))]
    ref_x = reference_groups(rows, aggs[0])
    ref_n = reference_groups(rows, aggs[1])
    assert not isinstance(ref_x, EvalError) and not isinstance(ref_n, EvalError)
    assert ref_x[0] == (3 * (2**62 + 1) + 7) / 4 and ref_x[1] == -(2.0**63)
    assert ref_n[2] == Decimal("-0.0000005") and ref_n[3] == Decimal("0.0000005")
    check(exact_spark, rows, aggs)
