"""The SQL functions' own errors are data too: sqrt of a negative number, a logarithm of zero,
chr(0), an invalid regular expression, split_part's field 0, an out-of-range date… A view
computing one over a bad row keeps that row in its error collection, and reads fail with
PostgreSQL's SQLSTATE for that error (asked of the PostgreSQL server) until the row is
retracted; the dataflow keeps stepping and then reads equal the reference evaluator's answer.
(Each used to stop the Spark job, and so the view, for good.)"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.errors import EvalError
from spate.errors._evaluation import FIELD_SEP
from spate.frontier.antichain import Antichain
from spate.ids import GlobalId
from spate.plan.evaluation.relation import evaluate
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Case,
    ColumnRef,
    Literal,
    ScalarExpr,
    VariadicFunc,
)
from spate.plan.relation import Get, Map
from spate.render.dataflow import CollectionInError, Dataflow
from spate.render.input import ArrowInputs
from spate.repr import FLOAT64, INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_to_table
from spate.repr.types import Row
from spate.testing.plan_strategies import single_plan_dataflow
from tests.render.oracle import peeked

pytestmark = pytest.mark.integration

T = GlobalId.user(1)
DESC = RelationDesc.of(("k", INT64, False), ("f", FLOAT64), ("i", INT64), ("s", TEXT))
K, F, N, S = ColumnRef(0), ColumnRef(1), ColumnRef(2), ColumnRef(3)
V = VariadicFunc


def _call(f: VariadicFunc, *args: ScalarExpr) -> ScalarExpr:
    return CallVariadic(f, args)


# (PostgreSQL's expression over t(k, f, i, s), spate's, a row on which it fails)
CASES: list[tuple[str, ScalarExpr, Row]] = [
    ("sqrt(f)", _call(V.SQRT, F), (1, -4.0, 1, "a")),
    ("ln(f)", _call(V.LN, F), (2, 0.0, 1, "a")),
    ("log10(f)", _call(V.LOG10, F), (3, -1.0, 1, "a")),
    ("exp(f)", _call(V.EXP, F), (4, 1000.0, 1, "a")),
    ("power(f, 0.5::float8)", _call(V.POWER, F, Literal(0.5, FLOAT64)), (5, -1.0, 1, "a")),
    ("power(f, -1::float8)", _call(V.POWER, F, Literal(-1.0, FLOAT64)), (6, 0.0, 1, "a")),
    ("chr(i::int)", _call(V.CHR, N), (7, 1.0, 0, "a")),
    ("chr(i::int)", _call(V.CHR, N), (8, 1.0, -1, "a")),
    ("chr(i::int)", _call(V.CHR, N), (9, 1.0, 1114112, "a")),
    (
        "split_part(s, ',', i::int)",
        _call(V.SPLIT_PART, S, Literal(",", TEXT), N),
        (10, 1.0, 0, "a"),
    ),
    ("repeat(s, i::int)", _call(V.REPEAT, S, N), (11, 1.0, 2_000_000_000, "ab")),
    ("lpad(s, i::int)", _call(V.LPAD, S, N, Literal(" ", TEXT)), (12, 1.0, 2_000_000_000, "a")),
    (
        "regexp_replace('abc', s, 'x')",
        _call(V.REGEXP_REPLACE, Literal("abc", TEXT), S, Literal("x", TEXT)),
        (13, 1.0, 1, "("),
    ),
    (
        "make_date(i::int, 2, 30)",
        _call(V.MAKE_DATE, N, Literal(2, INT64), Literal(30, INT64)),
        (14, 1.0, 2024, "a"),
    ),
]
GOOD: Counter[Row] = Counter({(0, 4.0, 2024, "a,b"): 1, (100, 2.0, 65, "[ab]"): 1})


def _pg_sqlstate(postgres_url: str, expression: str, row: Row) -> str | None:
    import psycopg

    schema = f"err_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            conn.execute("CREATE TABLE t (k bigint, f float8, i bigint, s text)")
            conn.execute("INSERT INTO t VALUES (%s, %s, %s, %s)", row)
            try:
                conn.execute(f"SELECT {expression} FROM t").fetchall()
            except psycopg.Error as e:
                return e.sqlstate
            return None
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_failing_function_rows_fail_reads_with_postgresql_sqlstates_until_retracted(
    spark: SparkSession, tmp_path: Path, postgres_url: str
) -> None:
    # each case's function evaluated on its bad row's k only
    scalars = tuple(
        Case(((CallBinary(BinaryFunc.EQ, K, Literal(bad[0], INT64)), e),), None)
        for _, e, bad in CASES
    )
    plan = Map(Get(T, DESC), scalars, tuple(f"v{n}" for n in range(len(CASES))))
    inputs = ArrowInputs.of(
        {T: updates_to_table(DESC, [(r, 0, n) for r, n in GOOD.items()])}, upper=1
    )
    df = Dataflow(
        single_plan_dataflow(plan, {T: DESC}), inputs, spark=spark, scratch=tmp_path, name="funcs"
    )
    ix = df.description.index_exports[0].id
    df.step()
    assert peeked(df.peek(ix, timestamp=0)) == Counter(evaluate(plan, {T: GOOD}, 0))
    # every bad row at once: one error record each, with PostgreSQL's SQLSTATE
    bad_rows = [bad for _, _, bad in CASES]
    inputs.append(T, updates_to_table(DESC, [(bad, 1, 1) for bad in bad_rows]), 2)
    df.step()
    with pytest.raises(CollectionInError) as caught:
        df.peek(ix, timestamp=1)
    assert "funcs" in str(caught.value) and f"{len(CASES)} errors" in str(caught.value)
    records = {}
    for record, n in df.errors.at(1):
        sqlstate, _, _, row = record.split(FIELD_SEP)
        assert n == 1 and row.startswith("(k="), record
        records[int(row[3:].split(",")[0])] = (sqlstate, record)
    for expression, _, bad in CASES:
        wanted = _pg_sqlstate(postgres_url, expression, bad)
        assert wanted is not None, expression
        assert records[bad[0]][0] == wanted, (expression, records[bad[0]])
        with pytest.raises(EvalError) as ref:  # the reference fails the same way
            evaluate(plan, {T: GOOD + Counter({bad: 1})}, 0)
        assert ref.value.sqlstate == wanted, (expression, ref.value)
    # the dataflow steps on; retracting the rows clears the errors
    inputs.append(T, updates_to_table(DESC, [(bad, 2, -1) for bad in bad_rows]), 3)
    df.step()
    assert df.upper == Antichain.of(3)
    assert peeked(df.peek(ix, timestamp=2)) == Counter(evaluate(plan, {T: GOOD}, 2))
    df.drop()
