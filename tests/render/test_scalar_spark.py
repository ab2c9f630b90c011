"""compile_scalar on Spark agrees with the reference evaluator (spate.plan.evaluation.scalar).

Randomised: hypothesis draws typed expressions over a relation with a column of every type and
rows with edge values (NULL, NaN, -0.0, int64 limits, years 1 and 9999, odd text); one Spark
action evaluates a batch of expressions over all rows. Expressions on which the reference raises
EvalError for some row are checked one at a time: Spark must raise too.
``SPATE_SPARK_EXAMPLES=<n>`` raises the number of random examples (nightly runs).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
from collections.abc import Sequence
from decimal import Context, Decimal
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from spate.plan.errors import EvalError
from spate.plan.evaluation.scalar import NAN, canonical_row
from spate.plan.evaluation.scalar import compile_scalar as reference_compile
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    ColumnRef,
    DateTrunc,
    Extract,
    Literal,
    Now,
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
    children,
    show,
)
from spate.plan.infer import resolve
from spate.render.layout import col_name
from spate.render.scalar import (
    EXACT_DECIMAL_CONF,
    ScalarNotCompilable,
    compile_scalar,
    like_regex,
)
from spate.repr.desc import RelationDesc
from spate.repr.spark import spark_type
from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    INT64_MAX,
    INT64_MIN,
    JSONB,
    TEXT,
    TIMESTAMP,
    Datum,
    Row,
    ScalarKind,
    ScalarType,
    numeric,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession

K = ScalarKind
N10 = numeric(10, 2)
N38 = numeric(38, 4)
DESC = RelationDesc.of(
    ("i", INT64),
    ("j", INT64),
    ("p", BOOL),
    ("q", BOOL),
    ("s", TEXT),
    ("u", TEXT),
    ("f", FLOAT64),
    ("g", FLOAT64),
    ("ts", TIMESTAMP),
    ("ts2", TIMESTAMP),
    ("d", DATE),
    ("d2", DATE),
    ("n", N10),
    ("m", N38),
    ("b", BYTES),
    ("js", JSONB),
)
WIDE = Context(prec=100)
POS = {name: i for i, name in enumerate(DESC.names)}


def c(name: str) -> ColumnRef:
    return ColumnRef(POS[name])


# --- Spark helpers -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exact_spark(spark: SparkSession) -> Iterator[SparkSession]:
    """The session with EXACT_DECIMAL_CONF set (restored afterwards)."""
    old = {k: spark.conf.get(k) for k in EXACT_DECIMAL_CONF}
    for k, v in EXACT_DECIMAL_CONF.items():
        spark.conf.set(k, v)
    yield spark
    for k, v in old.items():
        spark.conf.set(k, v)


def frame(spark: SparkSession, desc: RelationDesc, rows: Sequence[Row]) -> DataFrame:
    from pyspark.sql import types as T

    schema = T.StructType(
        [T.StructField(col_name(i), spark_type(c.type), True) for i, c in enumerate(desc.columns)]
    )
    return spark.createDataFrame([tuple(r) for r in rows], schema)


def spark_eval(
    spark: SparkSession, desc: RelationDesc, rows: Sequence[Row], exprs: Sequence[ScalarExpr]
) -> list[tuple[Datum, ...]]:
    """Each expression on each row: ``out[row][expr]``, in one Spark action. The rows are
    given as storage holds them (a ``-0.0`` is stored as ``0.0``), as the reference reads them."""
    df = frame(spark, desc, [canonical_row(r, desc.columns) for r in rows])
    cols = [compile_scalar(e, desc).alias(f"e{k}") for k, e in enumerate(exprs)]
    return [tuple(_py(v) for v in r) for r in df.select(*cols).collect()]


def _py(v: Any) -> Datum:
    if isinstance(v, bytearray):
        return bytes(v)
    out: Datum = v
    return out


def same(a: Datum, b: Datum) -> bool:
    """Exact equality: NULL only with NULL, floats equal or both NaN, no bool/int mixing."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, float) and isinstance(b, float)):
            return False
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if type(a) is not type(b):
        return False
    return a == b


def reference_values(
    desc: RelationDesc, rows: Sequence[Row], expr: ScalarExpr
) -> list[Datum] | EvalError:
    fn = reference_compile(expr, desc.columns)
    try:
        return [fn(canonical_row(r, desc.columns), 0) for r in rows]
    except EvalError as e:
        return e


def reference_defined(desc: RelationDesc, rows: Sequence[Row], expr: ScalarExpr) -> bool:
    """False where the reference itself fails: casting a float beyond 10**120 to numeric raises
    decimal.InvalidOperation in ``fit_numeric`` instead of giving NULL (a reference bug)."""
    try:
        reference_values(desc, rows, expr)
    except decimal.InvalidOperation:
        return False
    return True


def check(
    spark: SparkSession,
    desc: RelationDesc,
    rows: Sequence[Row],
    exprs: Sequence[ScalarExpr],
    *,
    max_failing: int = 1,
) -> None:
    """Spark agrees with the reference on every (row, expr); failing exprs must fail in Spark."""
    ok: list[tuple[ScalarExpr, list[Datum]]] = []
    failing: list[ScalarExpr] = []
    for e in exprs:
        if not reference_defined(desc, rows, e):
            continue
        ref = reference_values(desc, rows, e)
        if isinstance(ref, EvalError):
            failing.append(e)
        else:
            ok.append((e, ref))
    if ok:
        got = spark_eval(spark, desc, rows, [e for e, _ in ok])
        bad = [
            f"{show(e, desc.names)} on row {r} {row!r}: spark {got[r][k]!r}, reference {want!r}"
            for k, (e, ref) in enumerate(ok)
            for r, (row, want) in enumerate(zip(rows, ref, strict=True))
            if not same(got[r][k], want)
        ]
        assert not bad, "\n".join(bad[:10])
    for e in failing[:max_failing]:
        node, row = failing_node(desc, rows, e)
        try:
            got = spark_eval(spark, desc, [row], [node])
        except AssertionError:
            raise
        except Exception:  # any Spark error is the expected outcome
            continue
        pytest.fail(
            f"{show(node, desc.names)} raises in the reference but Spark returned {got[0][0]!r}"
            f" on row {row!r} (inside {show(e, desc.names)})"
        )


def failing_node(desc: RelationDesc, rows: Sequence[Row], e: ScalarExpr) -> tuple[ScalarExpr, Row]:
    """The innermost sub-expression of ``e`` that raises EvalError, and a row it raises on.

    Spark short-circuits (a NULL operand, a deciding side of AND/OR) where the reference
    evaluates every operand, so only the function that raises must raise in Spark too.
    """
    row = next(r for r in rows if isinstance(reference_values(desc, [r], e), EvalError))
    node = e
    while True:
        inner = [
            x for x in children(node) if isinstance(reference_values(desc, [row], x), EvalError)
        ]
        if not inner:
            return node, row
        node = inner[0]


# --- value strategies --------------------------------------------------------------------------

EDGE_INTS = [0, 1, -1, 2, -7, 7, 1000, INT64_MAX, INT64_MIN, INT64_MAX - 1, 2**31, -(2**31) - 1]
EDGE_FLOATS = [0.0, -0.0, 1.0, -1.5, 2.5, NAN, math.inf, -math.inf, 1e308, 5e-324, 0.1, 3.0]
EDGE_TEXT = [
    "", " ", "a", "A b", " 12 ", "-7", "+3", "1.5", "1e3", ".5", "1.", "-.5e-2", "nan", "-Inf",
    "infinity", "9223372036854775808", "true", "off", "YES", "2020-02-29", "0000-01-01",
    "2021-02-30", "2020-01-02 03:04:05.123", "2020-01-02T03:04:05", "1999-12-31 24:00:00",
    "%", "_", "a%b", "a_c", "\\", "\\%", "ab\\", "\t x \n", "\u00a0y\u2003", "é", "ß", "ÄÖ",
    '{"a": 1}', "[1, 2]", "null", "{bad", "a,b,,c", "12345678901.235",
]  # fmt: skip
EDGE_TS = [
    dt.datetime(1970, 1, 1),
    dt.datetime(1970, 1, 1, 0, 0, 0, 1500),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999500),
    dt.datetime(2024, 2, 29, 13, 45, 6, 789000),
    dt.datetime(2021, 1, 3, 23, 0),
    dt.datetime(1, 1, 1),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(999, 7, 4, 1, 2, 3),
]
EDGE_DATES = [
    dt.date(1970, 1, 1),
    dt.date(2024, 2, 29),
    dt.date(2021, 1, 3),
    dt.date(2020, 12, 31),
    dt.date(1, 1, 1),
    dt.date(9999, 12, 31),
    dt.date(1900, 3, 1),
]


def values(t: ScalarType) -> st.SearchStrategy[Datum]:
    k = t.kind
    if k is K.BOOL:
        return st.booleans()
    if k is K.INT64:
        return st.one_of(st.sampled_from(EDGE_INTS), st.integers(-20, 20))
    if k is K.FLOAT64:
        return st.one_of(st.sampled_from(EDGE_FLOATS), st.integers(-8, 8).map(lambda n: n / 4))
    if k is K.NUMERIC:
        assert t.precision is not None and t.scale is not None
        scale = t.scale
        big = 10 ** min(t.precision, 28) - 1
        return st.one_of(
            st.integers(-2000, 2000), st.sampled_from([big, -big, 5, -5, 10**scale])
        ).map(lambda n: Decimal(n).scaleb(-scale, context=WIDE))
    if k is K.TEXT:
        return st.one_of(st.sampled_from(EDGE_TEXT), st.text("ab%_\\ Z1.-", max_size=5))
    if k is K.BYTES:
        return st.binary(max_size=4)
    if k is K.DATE:
        return st.one_of(
            st.sampled_from(EDGE_DATES),
            st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
        )
    if k is K.TIMESTAMP:
        return st.one_of(
            st.sampled_from(EDGE_TS),
            st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)),
        )
    return st.sampled_from(['{"a": 1}', "[]", "1", "null", '"x"'])


def rows_of(desc: RelationDesc, n: int) -> st.SearchStrategy[list[Row]]:
    row = st.tuples(*[st.one_of(st.none(), values(c.type)) for c in desc.columns])
    return st.lists(row, min_size=1, max_size=n)


# --- expression strategies ---------------------------------------------------------------------

COLS: dict[ScalarKind, list[str]] = {}
for _c in DESC.columns:
    COLS.setdefault(_c.type.kind, []).append(_c.name)
TYPE_OF_KIND = {
    K.BOOL: BOOL, K.INT64: INT64, K.FLOAT64: FLOAT64, K.TEXT: TEXT, K.BYTES: BYTES,
    K.DATE: DATE, K.TIMESTAMP: TIMESTAMP, K.JSONB: JSONB, K.NUMERIC: N10,
}  # fmt: skip
ARITH = [BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD]
CMP = [BinaryFunc.EQ, BinaryFunc.NE, BinaryFunc.LT, BinaryFunc.LE, BinaryFunc.GT, BinaryFunc.GE]
TS_UNITS = [u for u in TimeUnit if u not in (TimeUnit.DOW, TimeUnit.DOY)]
DATE_UNITS = [TimeUnit.YEAR, TimeUnit.QUARTER, TimeUnit.MONTH, TimeUnit.WEEK, TimeUnit.DAY]


def leaf(kind: ScalarKind) -> st.SearchStrategy[ScalarExpr]:
    t = TYPE_OF_KIND[kind]
    lits = st.one_of(st.none(), values(t)).map(lambda v: Literal(v, t))
    return st.one_of(st.sampled_from(COLS[kind]).map(c), lits)


def binary(
    funcs: Sequence[BinaryFunc], a: st.SearchStrategy[ScalarExpr], b: st.SearchStrategy[ScalarExpr]
) -> st.SearchStrategy[ScalarExpr]:
    return st.builds(CallBinary, st.sampled_from(list(funcs)), a, b)


def unary(
    funcs: Sequence[UnaryFunc], a: st.SearchStrategy[ScalarExpr]
) -> st.SearchStrategy[ScalarExpr]:
    return st.builds(CallUnary, st.sampled_from(list(funcs)), a)


_CACHE: dict[tuple[ScalarKind, int], st.SearchStrategy[ScalarExpr]] = {}


def exprs(kind: ScalarKind, depth: int) -> st.SearchStrategy[ScalarExpr]:
    key = (kind, depth)
    if key not in _CACHE:
        _CACHE[key] = _exprs(kind, depth)
    return _CACHE[key]


def _exprs(kind: ScalarKind, depth: int) -> st.SearchStrategy[ScalarExpr]:
    base = leaf(kind)
    if depth == 0:
        return base

    def sub(k: ScalarKind) -> st.SearchStrategy[ScalarExpr]:
        return exprs(k, depth - 1)

    def cast_from(*kinds: ScalarKind) -> st.SearchStrategy[ScalarExpr]:
        to = TYPE_OF_KIND[kind]
        if kind is K.NUMERIC:
            return st.builds(
                Cast,
                st.sampled_from(kinds).flatmap(sub),
                st.sampled_from([N10, N38, numeric(5, 5), numeric(3, 0)]),
            )
        return st.builds(Cast, st.sampled_from(kinds).flatmap(sub), st.just(to))

    opts: list[st.SearchStrategy[ScalarExpr]] = [base]
    if kind is K.INT64:
        opts += [
            binary(ARITH, sub(K.INT64), sub(K.INT64)),
            unary([UnaryFunc.NEG, UnaryFunc.ABS], sub(K.INT64)),
            st.builds(
                CallUnary,
                st.just(UnaryFunc.LENGTH),
                st.sampled_from([K.TEXT, K.BYTES]).flatmap(sub),
            ),
            unary([UnaryFunc.EPOCH_MS, UnaryFunc.EPOCH_MS_CEIL], sub(K.TIMESTAMP)),
            binary([BinaryFunc.TIMESTAMP_DIFF_MS], sub(K.TIMESTAMP), sub(K.TIMESTAMP)),
            binary([BinaryFunc.DATE_DIFF_DAYS], sub(K.DATE), sub(K.DATE)),
            st.builds(Extract, st.sampled_from(list(TimeUnit)), sub(K.TIMESTAMP)),
            st.builds(
                Extract, st.sampled_from([*DATE_UNITS, TimeUnit.DOW, TimeUnit.DOY]), sub(K.DATE)
            ),
            cast_from(K.BOOL, K.FLOAT64, K.NUMERIC, K.TEXT),
        ]
    elif kind is K.FLOAT64:
        opts += [
            binary(ARITH, sub(K.FLOAT64), sub(K.FLOAT64)),
            unary([UnaryFunc.NEG, UnaryFunc.ABS], sub(K.FLOAT64)),
            cast_from(K.INT64, K.NUMERIC, K.TEXT),
        ]
    elif kind is K.NUMERIC:
        numeric_ops = [BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.MOD]
        opts += [
            binary(numeric_ops, sub(K.NUMERIC), sub(K.NUMERIC)),
            # Leaves only: the reference negates with Python's default decimal context, which
            # rounds results of more than 28 digits (a reference bug, reported).
            unary([UnaryFunc.NEG, UnaryFunc.ABS], leaf(K.NUMERIC)),
            cast_from(K.INT64, K.FLOAT64, K.TEXT, K.NUMERIC),
        ]
    elif kind is K.BOOL:
        # Numerics compare as leaves only (see the module docs of spate.render.scalar).
        comparable = st.sampled_from(
            [K.INT64, K.FLOAT64, K.TEXT, K.BYTES, K.DATE, K.TIMESTAMP, K.BOOL]
        )
        opts += [
            comparable.flatmap(lambda k: binary(CMP, sub(k), sub(k))),
            binary(CMP, leaf(K.NUMERIC), leaf(K.NUMERIC)),
            binary([BinaryFunc.AND, BinaryFunc.OR], sub(K.BOOL), sub(K.BOOL)),
            unary([UnaryFunc.NOT], sub(K.BOOL)),
            st.sampled_from(list(TYPE_OF_KIND)).flatmap(
                lambda k: unary([UnaryFunc.IS_NULL], sub(k))
            ),
            binary([BinaryFunc.LIKE, BinaryFunc.ILIKE], sub(K.TEXT), sub(K.TEXT)),
            cast_from(K.INT64, K.TEXT),
        ]
    elif kind is K.TEXT:
        opts += [
            unary([UnaryFunc.LOWER, UnaryFunc.UPPER, UnaryFunc.TRIM], sub(K.TEXT)),
            binary([BinaryFunc.CONCAT], sub(K.TEXT), sub(K.TEXT)),
            st.tuples(sub(K.TEXT), sub(K.INT64)).map(
                lambda a: CallVariadic(VariadicFunc.SUBSTR, a)
            ),
            st.tuples(sub(K.TEXT), sub(K.INT64), sub(K.INT64)).map(
                lambda a: CallVariadic(VariadicFunc.SUBSTR, a)
            ),
            cast_from(K.BOOL, K.INT64, K.NUMERIC, K.DATE, K.TIMESTAMP, K.JSONB),
        ]
    elif kind is K.TIMESTAMP:
        opts += [
            binary(
                [BinaryFunc.TIMESTAMP_ADD_MS, BinaryFunc.TIMESTAMP_SUB_MS],
                sub(K.TIMESTAMP),
                sub(K.INT64),
            ),
            unary([UnaryFunc.FROM_EPOCH_MS], sub(K.INT64)),
            st.builds(DateTrunc, st.sampled_from(TS_UNITS), sub(K.TIMESTAMP)),
            cast_from(K.DATE, K.TEXT),
        ]
    elif kind is K.DATE:
        opts += [
            binary([BinaryFunc.DATE_ADD_DAYS], sub(K.DATE), sub(K.INT64)),
            st.builds(DateTrunc, st.sampled_from(DATE_UNITS), sub(K.DATE)),
            cast_from(K.TIMESTAMP, K.TEXT),
        ]
    elif kind is K.JSONB:
        opts.append(cast_from(K.TEXT))
    opts.append(
        st.builds(
            lambda cond, a, b: Case(((cond, a),), b),
            sub(K.BOOL),
            sub(kind),
            st.one_of(st.none(), sub(kind)),
        )
    )
    funcs = [VariadicFunc.COALESCE]
    if kind is not K.JSONB:
        funcs += [VariadicFunc.GREATEST, VariadicFunc.LEAST]
    opts.append(
        st.tuples(st.sampled_from(funcs), st.lists(sub(kind), min_size=1, max_size=3)).map(
            lambda a: CallVariadic(a[0], tuple(a[1]))
        )
    )
    return st.one_of(*opts)


@st.composite
def typed_exprs(draw: st.DrawFn, depth: int) -> ScalarExpr:
    kind = draw(st.sampled_from(list(TYPE_OF_KIND)))
    e = draw(exprs(kind, depth))
    return resolve(e, DESC.columns)[0]


# --- the property ------------------------------------------------------------------------------


# Shrinking re-runs Spark actions for minutes; the failure message names the expression and row.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


@settings(
    max_examples=int(os.environ.get("SPATE_SPARK_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=NO_SHRINK,
    print_blob=True,
)
@given(rows=rows_of(DESC, 25), batch=st.lists(typed_exprs(3), min_size=12, max_size=24))
def test_random_expressions_match_reference(
    exact_spark: SparkSession, rows: list[Row], batch: list[ScalarExpr]
) -> None:
    check(exact_spark, DESC, rows, batch)


# --- targeted edge cases -----------------------------------------------------------------------


def R(expr: object) -> ScalarExpr:
    """A builder expression resolved against DESC."""
    return resolve(expr, DESC.columns)[0]


def one_row(**values: Datum) -> Row:
    return tuple(values.get(name) for name in DESC.names)


def test_edge_cases_match_reference_and_expected_values(exact_spark: SparkSession) -> None:
    """Each documented edge case, on one row, against the reference and a hand-written value."""
    from spate.plan import case, coalesce, col, greatest, least, lit

    ts = dt.datetime(2021, 1, 3, 13, 45, 6, 789500)  # a Sunday
    row = one_row(
        i=-7, j=2, f=NAN, g=-0.0, s="  a b  ", u="ab\\", ts=ts, d=dt.date(2021, 1, 3),
        n=Decimal("12.35"), m=Decimal("-0.0005"), b=b"\x00\xff", js='{"a": 1}',
    )  # fmt: skip
    big = lit(INT64_MAX)
    cases: list[tuple[object, Datum]] = [
        # NULL propagation and three-valued logic
        (col("p") & lit(False), False),
        (col("p") | lit(True), True),
        (col("p") & lit(True), None),
        (col("p").is_null(), True),
        (coalesce(col("q"), lit(None, BOOL), lit(True)), True),
        (greatest(col("j"), lit(None, INT64), lit(1)), 2),
        (least(lit(None, INT64), lit(None, INT64)), None),
        # int64 arithmetic: truncating division, remainder sign of the dividend, by zero
        (col("i") / col("j"), -3),
        (col("i") % col("j"), -1),
        (lit(7) % lit(-2), 1),
        (col("i") / lit(0), None),
        (col("i") % lit(0), None),
        (lit(5) / lit(0), None),
        (lit(INT64_MIN) % lit(-1), 0),
        (lit(1.5) / lit(-0.0), None),
        (lit(math.inf) % lit(2.0), NAN),
        # floats: NaN = NaN, NaN largest, -0.0 = 0.0, division by ±0 gives NULL
        (col("f").eq(col("f")), True),
        (col("f") > lit(math.inf), True),
        (col("g").eq(lit(0.0)), True),
        (lit(1.0) / col("g"), None),
        (lit(5.5) % lit(2.0), 1.5),
        (lit(-5.5) % lit(2.0), -1.5),
        (-(lit(0.0)), 0.0),
        (greatest(col("f"), lit(1.0)), NAN),
        (least(col("f"), lit(1.0)), 1.0),
        # numeric: result scales of the IR
        (col("n") * col("m"), Decimal("-0.006175")),
        (col("n") + col("m"), Decimal("12.3495")),
        (col("n") % lit(Decimal("5.1")), Decimal("2.15")),
        # numeric division: PostgreSQL's result scale per quotient, by zero NULL
        (col("n") / col("m"), Decimal("-24700")),
        (col("n") / lit(Decimal(3)), Decimal("4.1166666666666667")),
        (lit(Decimal(1)) / lit(Decimal(3)), Decimal("0.33333333333333333333")),
        (col("n") / lit(Decimal("0.00")), None),
        (col("n").cast(numeric(5, 1)), Decimal("12.4")),
        (col("m").cast(numeric(5, 3)), Decimal("-0.001")),
        (col("n").cast(INT64), 12),
        (lit(Decimal("-12.99")).cast(INT64), -12),
        (col("n").cast(FLOAT64), 12.35),
        (col("n").cast(TEXT), "12.35"),
        # strings
        (col("s").trim(), "a b"),
        (lit("\tx ").trim(), "\tx"),
        (col("s").length(), 7),
        (col("b").length(), 2),
        (lit("ÄÖß").upper(), "ÄÖSS"),
        (col("s").concat(lit(None, TEXT)), None),
        (lit("abc").like("a%"), True),
        (lit("a%c").like("a\\%c"), True),
        (lit("abc").like("a\\%c"), False),
        (lit("a_c").like("a\\_c"), True),
        (lit("ab\\").like("ab\\"), True),
        (lit("a.c").like("a.c"), True),
        (lit("abc").like("a.c"), False),
        (lit("a\nb").like("a_b"), True),
        (lit("ABC").ilike("a%c"), True),
        (lit("ABC").like("a%c"), False),
        (col("u").like(col("u")), True),
        (lit("xyz").like(lit("x\\y%")), True),
        (lit("a%").like(col("u").concat(lit("%"))), False),
        (lit("hello").substr(2, 3), "ell"),
        (lit("hello").substr(-1, 3), "h"),
        (lit("hello").substr(-5, 3), ""),
        (lit("hello").substr(0), "hello"),
        (lit("hello").substr(4), "lo"),
        (lit("hello").substr(9), ""),
        (lit("hello").substr(2, -1), None),
        (lit("hello").substr(lit(INT64_MIN), big), ""),
        (lit("hello").substr(-2, 5), "he"),
        (lit("hello").substr(big, big), ""),
        # casts from text: unparseable gives NULL
        (lit(" 12 ").cast(INT64), 12),
        (lit("1.5").cast(INT64), None),
        (lit("9223372036854775808").cast(INT64), None),
        (lit("+7").cast(INT64), 7),
        (lit("-.5e-2").cast(FLOAT64), -0.005),
        (lit("-Inf").cast(FLOAT64), -math.inf),
        (lit("nan").cast(FLOAT64), NAN),
        (lit("1e").cast(FLOAT64), None),
        (lit("-0").cast(FLOAT64), 0.0),
        (lit("1.005").cast(numeric(10, 2)), Decimal("1.01")),
        (lit("-1.005").cast(numeric(10, 2)), Decimal("-1.01")),
        (lit("1e3").cast(numeric(10, 2)), Decimal("1000.00")),
        (lit("1e8").cast(numeric(10, 2)), None),
        (lit("123456789012").cast(numeric(10, 2)), None),
        (lit("on").cast(BOOL), True),
        (lit(" No ").cast(BOOL), False),
        (lit("maybe").cast(BOOL), None),
        (lit("2020-02-29").cast(DATE), dt.date(2020, 2, 29)),
        (lit("2021-02-29").cast(DATE), None),
        (lit("0000-01-01").cast(DATE), None),
        (lit("20200101").cast(DATE), None),
        (lit("2020-01-02T03:04:05.5").cast(TIMESTAMP), dt.datetime(2020, 1, 2, 3, 4, 5, 500000)),
        (lit("2020-01-02 24:00:00").cast(TIMESTAMP), None),
        (lit("2020-01-02").cast(TIMESTAMP), dt.datetime(2020, 1, 2)),
        (lit("{bad").cast(JSONB), None),
        (lit(" [1, 2] ").cast(JSONB), " [1, 2] "),
        (lit("null").cast(JSONB), "null"),
        # one JSON value and nothing after it (Spark's parser alone ignores the rest)
        (lit('{"a": 1}[1, 2]').cast(JSONB), None),
        (lit("1 2").cast(JSONB), None),
        (lit('1, "y": 2').cast(JSONB), None),
        (lit("1}]").cast(JSONB), None),
        # casts between numbers
        (lit(2.0**63).cast(INT64), None),
        (lit(-(2.0**63)).cast(INT64), INT64_MIN),
        (lit(-2.9).cast(INT64), -2),
        (col("f").cast(INT64), None),
        (lit(0.1).cast(numeric(38, 30)), Decimal("0.1")),
        (lit(2.675).cast(numeric(10, 2)), Decimal("2.68")),
        (lit(math.inf).cast(numeric(10, 2)), None),
        (big.cast(numeric(18, 0)), None),
        (big.cast(FLOAT64), 9.223372036854776e18),
        (lit(True).cast(INT64), 1),
        (lit(-3).cast(BOOL), True),
        # casts to text
        (lit(True).cast(TEXT), "true"),
        (col("ts").cast(TEXT), "2021-01-03 13:45:06.7895"),
        (lit(dt.datetime(999, 1, 2)).cast(TEXT), "999-01-02 00:00:00"),
        (lit(dt.date(999, 1, 2)).cast(TEXT), "0999-01-02"),
        (col("js").cast(TEXT), '{"a": 1}'),
        (lit(Decimal("0.00000001")).cast(TEXT), "0.00000001"),
        # time
        (col("ts").epoch_ms(), 1609681506789),
        (CallUnary(UnaryFunc.EPOCH_MS_CEIL, col("ts")), 1609681506790),
        (lit(dt.datetime(1969, 12, 31, 23, 59, 59, 999500)).epoch_ms(), -1),
        (CallUnary(UnaryFunc.EPOCH_MS_CEIL, lit(dt.datetime(1969, 12, 31, 23, 59, 59, 999500))), 0),
        (CallUnary(UnaryFunc.FROM_EPOCH_MS, lit(-1)), dt.datetime(1969, 12, 31, 23, 59, 59, 999000)),
        (CallBinary(BinaryFunc.TIMESTAMP_DIFF_MS, lit(dt.datetime(1970, 1, 1)), col("ts")), -1609681506790),
        (CallBinary(BinaryFunc.TIMESTAMP_ADD_MS, col("ts"), lit(-1)), dt.datetime(2021, 1, 3, 13, 45, 6, 788500)),
        (CallBinary(BinaryFunc.DATE_ADD_DAYS, col("d"), lit(-3)), dt.date(2020, 12, 31)),
        # a NULL date or timestamp moved by any offset is NULL, not a range error
        (CallBinary(BinaryFunc.DATE_ADD_DAYS, lit(None, DATE), lit(INT64_MAX)), None),
        (CallBinary(BinaryFunc.TIMESTAMP_ADD_MS, lit(None, TIMESTAMP), lit(-INT64_MAX)), None),
        (CallBinary(BinaryFunc.DATE_DIFF_DAYS, col("d"), lit(dt.date(2020, 12, 31))), 3),
        (col("ts").date_trunc("week"), dt.datetime(2020, 12, 28)),
        (col("d").date_trunc("week"), dt.date(2020, 12, 28)),
        (col("ts").date_trunc("quarter"), dt.datetime(2021, 1, 1)),
        (col("ts").date_trunc("second"), dt.datetime(2021, 1, 3, 13, 45, 6)),
        (lit(dt.datetime(1969, 12, 31, 23, 59, 59, 999500)).date_trunc("hour"), dt.datetime(1969, 12, 31, 23)),
        (col("ts").extract("week"), 53),
        (col("ts").extract("dow"), 0),
        (col("d").extract("doy"), 3),
        (col("ts").extract("second"), 6),
        (lit(dt.date(2024, 12, 30)).extract("week"), 1),
        (case((col("p"), lit(1)), otherwise=lit(2)), 2),
        (case((col("i") < 0, lit(1.5)), (lit(True), lit(2))), 1.5),
    ]  # fmt: skip
    exprs = [R(e) for e, _ in cases]
    for e, (_, want) in zip(exprs, cases, strict=True):
        ref = reference_values(DESC, [row], e)
        assert not isinstance(ref, EvalError) and same(ref[0], want), (show(e, DESC.names), ref)
    check(exact_spark, DESC, [row, one_row()], exprs)


NUMERIC_TEXTS: list[tuple[str, Decimal | None]] = [
    ("1e2", Decimal("100.00")),
    ("1.5E-3", Decimal("0.00")),
    ("5e-3", Decimal("0.01")),
    ("-5E-3", Decimal("-0.01")),
    (" 12 ", Decimal("12.00")),
    ("+.5", Decimal("0.50")),
    ("1.e+2", Decimal("100.00")),
    ("1e-1000", Decimal("0.00")),
    ("1e1001", None),  # PostgreSQL: value overflows numeric format
    ("1e8", None),
    ("1e", None),
    ("NaN", None),
    ("inf", None),
    ("1_0", None),
    ("9" * 200, None),
]


def test_text_column_cast_to_numeric_takes_exponents(exact_spark: SparkSession) -> None:
    """A text column cast to numeric reads PostgreSQL's exponent syntax ('1e2' is 100) and
    rounds half away from zero to the scale, on Spark as in the reference (it gave NULL)."""
    from spate.plan import col

    rows = [one_row(s=text) for text, _ in NUMERIC_TEXTS]
    e = R(col("s").cast(N10))
    ref = reference_values(DESC, rows, e)
    assert not isinstance(ref, EvalError)
    assert [(t, v) for (t, _), v in zip(NUMERIC_TEXTS, ref, strict=True)] == NUMERIC_TEXTS
    got = [r[0] for r in spark_eval(exact_spark, DESC, rows, [e])]
    assert [(t, v) for (t, _), v in zip(NUMERIC_TEXTS, got, strict=True)] == NUMERIC_TEXTS


@pytest.mark.parametrize(
    "expr",
    [
        "i_max + 1",
        "i_min - 1",
        "i_max * 2",
        "-i_min",
        "abs(i_min)",
        "i_min / -1",
        "from_epoch_ms(max)",
        "ts + huge ms",
        "ts - -1 ms at 9999",
        "date + days past 9999",
        "numeric overflow",
    ],
)
def test_evaluation_errors_raise(exact_spark: SparkSession, expr: str) -> None:
    from spate.plan import col, lit

    row = one_row(i=INT64_MAX, j=INT64_MIN, ts=dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
                  d=dt.date(9999, 12, 30), m=Decimal("9" * 34))  # fmt: skip
    exprs: dict[str, object] = {
        "i_max + 1": col("i") + 1,
        "i_min - 1": col("j") - 1,
        "i_max * 2": col("i") * 2,
        "-i_min": -col("j"),
        "abs(i_min)": col("j").abs(),
        "i_min / -1": col("j") / -1,
        "from_epoch_ms(max)": CallUnary(UnaryFunc.FROM_EPOCH_MS, col("i")),
        "ts + huge ms": CallBinary(BinaryFunc.TIMESTAMP_ADD_MS, col("ts"), col("i")),
        "ts - -1 ms at 9999": CallBinary(BinaryFunc.TIMESTAMP_SUB_MS, col("ts"), lit(-1)),
        "date + days past 9999": CallBinary(BinaryFunc.DATE_ADD_DAYS, col("d"), lit(2)),
        "numeric overflow": col("m") * col("m"),
    }
    e = R(exprs[expr])
    assert isinstance(reference_values(DESC, [row], e), EvalError)
    with pytest.raises(Exception, match=r"(?i)overflow|out of range|cannot be represented"):
        spark_eval(exact_spark, DESC, [row], [e])


def test_now_is_rejected() -> None:
    with pytest.raises(ScalarNotCompilable, match="temporal_bounds"):
        compile_scalar(CallBinary(BinaryFunc.LT, Now(INT64), c("i")), DESC)


def test_like_regex_escapes() -> None:
    assert like_regex("a%b_c") == "(?s)\\Aa.*b.c\\z"
    assert like_regex("\\%\\_\\\\x\\") == "(?s)\\A\\%\\_\\\\x\\\\\\z"
    assert like_regex("é.$") == "(?s)\\Aé\\.\\$\\z"


def test_column_names_are_configurable(exact_spark: SparkSession) -> None:
    desc = RelationDesc.of(("x", INT64), ("y", INT64))
    df = exact_spark.createDataFrame([(3, 4)], "`a.b` long, `we``ird` long")
    e = CallBinary(BinaryFunc.MUL, ColumnRef(0), ColumnRef(1))
    assert df.select(compile_scalar(e, desc, ["a.b", "we`ird"])).collect()[0][0] == 12


def test_numeric_comparisons_across_types_keep_every_digit(exact_spark: SparkSession) -> None:
    """Two numerics whose exact common type needs more than 38 digits compare exactly: Spark
    widened ``numeric(8,3)`` against ``numeric(38,0)`` to ``decimal(38,0)``, so ``0.125 > 0``
    was false (ceil/floor of a numeric column were wrong on Spark)."""
    desc = RelationDesc.of(
        ("w", numeric(38, 0)), ("d", numeric(8, 3)), ("x", numeric(38, 10)), ("y", numeric(38, 38))
    )
    big, minus_big = Decimal("9" * 38), Decimal("-" + "9" * 38)
    rows: list[Row] = [
        (Decimal(0), Decimal("0.125"), Decimal("-0.0000000001"), Decimal("0." + "0" * 37 + "1")),
        (Decimal(-1), Decimal("-0.001"), Decimal("-1"), Decimal("-0." + "9" * 38)),
        (big, Decimal("-99999.999"), Decimal("9" * 28 + "." + "9" * 10), Decimal(0)),
        (minus_big, Decimal("99999.999"), Decimal("-0.5"), Decimal("-0.5")),
        (Decimal(3), Decimal("3.000"), Decimal("3"), None),
    ]
    ops = [BinaryFunc.EQ, BinaryFunc.NE, BinaryFunc.LT, BinaryFunc.LE, BinaryFunc.GT, BinaryFunc.GE]
    pairs = [(0, 1), (1, 0), (0, 2), (2, 3), (3, 0), (1, 2), (0, 3)]
    exprs: list[ScalarExpr] = [
        CallBinary(f, ColumnRef(i), ColumnRef(j)) for f in ops for i, j in pairs
    ]
    want = [[reference_compile(e, desc.columns)(r, 0) for e in exprs] for r in rows]
    got = [list(r) for r in spark_eval(exact_spark, desc, rows, exprs)]
    assert got == want
    assert want[0][ops.index(BinaryFunc.GT) * len(pairs) + 1] is True  # 0.125 > 0
