"""table_func_column on Spark agrees with spate.testing.reference.table_function.

Randomised: hypothesis draws rows of (start, stop, step, text, delimiter, a, b, c); one Spark
action computes every table function's array on every row; arrays must equal the reference's
value lists exactly (order included).
``SPATE_SPARK_EXAMPLES=<n>`` raises the number of random examples (nightly runs).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from spate.plan.table_func import TableFunc
from spate.render.table_funcs import table_func_column
from spate.repr.types import INT64_MAX, INT64_MIN, Datum
from spate.testing.reference import table_function

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCHEMA = "start long, stop long, step long, text string, delim string, a string, b string, c string"
Row8 = tuple[Any, ...]


def frame(spark: SparkSession, rows: list[Row8]) -> DataFrame:
    return spark.createDataFrame(rows, SCHEMA)


def evaluate(spark: SparkSession, rows: list[Row8]) -> list[dict[str, list[Datum]]]:
    from pyspark.sql import functions as F

    col = F.col
    df = frame(spark, rows).select(
        table_func_column(TableFunc.GENERATE_SERIES, [col("start"), col("stop")]).alias("gs2"),
        table_func_column(
            TableFunc.GENERATE_SERIES, [col("start"), col("stop"), col("step")]
        ).alias("gs3"),
        table_func_column(TableFunc.STRING_TO_TABLE, [col("text"), col("delim")]).alias("stt"),
        table_func_column(TableFunc.UNNEST, [col("a"), col("b"), col("c")]).alias("un"),
        table_func_column(TableFunc.UNNEST, [col("start")]).alias("un1"),
    )
    return [r.asDict() for r in df.collect()]


def expected(row: Row8) -> dict[str, list[Datum]]:
    start, stop, step, text, delim, a, b, c = row
    return {
        "gs2": table_function(TableFunc.GENERATE_SERIES, [start, stop]),
        "gs3": table_function(TableFunc.GENERATE_SERIES, [start, stop, step]),
        "stt": table_function(TableFunc.STRING_TO_TABLE, [text, delim]),
        "un": table_function(TableFunc.UNNEST, [a, b, c]),
        "un1": table_function(TableFunc.UNNEST, [start]),
    }


def check(spark: SparkSession, rows: list[Row8]) -> None:
    got = evaluate(spark, rows)
    bad = [
        f"{name} on row {row!r}: spark {have[name]!r}, reference {want[name]!r}"
        for row, have in zip(rows, got, strict=True)
        for name, want in [(n, expected(row)) for n in have]
        if have[name] != want[name]
    ]
    assert not bad, "\n".join(bad[:10])


texts = st.one_of(
    st.none(),
    st.sampled_from(["", "a", "a,b", ",a,,b,", "x.y.z", "a\\Eb\\Ec", "é|ü|", "aaa"]),
    st.text("ab,.|\\E", max_size=6),
)
delims = st.one_of(
    st.none(), st.sampled_from(["", ",", ".", "|", "\\E", "\\", "aa", "a", "$", "é"]), texts
)
ints = st.one_of(st.none(), st.integers(-6, 6))
rows = st.lists(
    st.tuples(ints, ints, ints, texts, delims, texts, texts, texts), min_size=1, max_size=30
)


@settings(
    max_examples=int(os.environ.get("SPATE_SPARK_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    print_blob=True,
)
@given(rows=rows)
def test_random_rows_match_reference(spark: SparkSession, rows: list[Row8]) -> None:
    check(spark, rows)


def test_edge_cases(spark: SparkSession) -> None:
    rows: list[Row8] = [
        (1, 3, None, "a,b", ",", None, "x", None),  # step NULL: no rows; unnest keeps NULLs
        (1, 3, 0, "", ",", "a", "b", "c"),  # step 0; empty text
        (3, 1, 1, "a", "", "a", None, "a"),  # wrong direction; empty delimiter
        (3, 1, -1, ",a,,", ",", None, None, None),  # counting down; empty pieces kept
        (1, 10, 4, "a.b.c", ".", "", "", ""),  # '.' is not a regex here
        (-2, -2, -5, "x\\Ey\\Ez", "\\E", None, None, None),  # \E inside the quoted delimiter
        (INT64_MAX - 1, INT64_MAX, 1, "a||b", "||", None, None, None),
        (INT64_MIN, INT64_MIN + 2, 2, None, ",", None, None, None),
        (None, 1, 1, "a", None, None, None, None),
    ]
    want = [
        {"gs3": [], "stt": ["a", "b"], "un": [None, "x", None]},
        {"gs3": [], "stt": [], "un": ["a", "b", "c"]},
        {"gs2": [], "gs3": [], "stt": ["a"], "un": ["a", None, "a"]},
        {"gs2": [], "gs3": [3, 2, 1], "stt": ["", "a", "", ""]},
        {"gs3": [1, 5, 9], "stt": ["a", "b", "c"], "un": ["", "", ""]},
        {"gs2": [-2], "gs3": [-2], "stt": ["x", "y", "z"]},
        {"gs3": [INT64_MAX - 1, INT64_MAX], "stt": ["a", "b"]},
        {"gs3": [INT64_MIN, INT64_MIN + 2], "stt": []},
        {"gs2": [], "gs3": [], "stt": [], "un1": [None]},
    ]
    for row, w in zip(rows, want, strict=True):
        ref = expected(row)
        assert {k: ref[k] for k in w} == w, row
    check(spark, rows)


def test_explode_drops_empty_arrays_and_keeps_multiplicity(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame(
        [(1, 3, 0, 2), (5, 1, 0, 1), (2, None, 0, 4)], "c0 long, c1 long, _time long, _diff long"
    )
    series = table_func_column(TableFunc.GENERATE_SERIES, [F.col("c0"), F.col("c1")])
    out = df.select("c0", "c1", F.explode(series).alias("c2"), "_time", "_diff").collect()
    assert [tuple(r) for r in out] == [(1, 3, 1, 0, 2), (1, 3, 2, 0, 2), (1, 3, 3, 0, 2)]
