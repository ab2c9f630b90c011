"""Corpus queries written again in Spark SQL give the corpus's answers through
``Environment.sql(..., dialect="spark")``.

Each case pairs a query of the corpus (PostgreSQL, by its exact text in a ``tests/sql/slt``
file) with the same question in Spark SQL: backticks, Spark's function names (``nvl``,
``ifnull``, ``nvl2``, ``if``, ``instr``, ``substr``, ``date_add``, ``datediff``, ``year``,
``dayofweek``…), ``<=>``, ``DIV``, ``LEFT SEMI``/``LEFT ANTI JOIN``, and Spark's rules made
explicit where they differ from PostgreSQL's (NULLs sort first ascending in Spark, so the
Spark text says ``NULLS LAST``; ``/`` is fractional, so integer division is ``DIV``).

Two oracles: PostgreSQL's answer to the corpus query is the expected answer; Spark itself
must give it to the Spark text too (so the pair really asks the same question), and spate must
give it to the Spark text (``dialect="spark"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from tests.sql._slt import SLT_DIR, parse_file
from tests.sql._slt_compare import compare
from tests.sql._slt_dml import load
from tests.sql._slt_pg import PgScratch
from tests.sql._slt_spate import CLUSTER

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spate.environment.api import Environment

# (corpus file, the corpus query exactly, the same question in Spark SQL)
CASES: list[tuple[str, str, str]] = [
    (
        "expressions.slt",
        "SELECT id, a + b, a - b, a * b FROM n",
        "SELECT `id`, `a` + `b`, `a` - `b`, `a` * `b` FROM `n`",
    ),
    ("expressions.slt", "SELECT id, a / 2, a % 2 FROM n", "SELECT id, a DIV 2, a % 2 FROM n"),
    (
        "expressions.slt",
        "SELECT id, a IS DISTINCT FROM b, a IS NOT DISTINCT FROM b FROM n",
        "SELECT id, NOT (a <=> b), a <=> b FROM n",
    ),
    (
        "expressions.slt",
        "SELECT id, a = b, a <> b, a < b, a <= b, a > b, a >= b FROM n",
        "SELECT id, a == b, a != b, a < b, a <= b, a > b, a >= b FROM n",
    ),
    (
        "expressions.slt",
        "SELECT id, a IN (1, 7), a NOT IN (1, 7), a IN (1, NULL), a NOT IN (1, NULL) FROM n",
        "SELECT `id`, `a` IN (1, 7), `a` NOT IN (1, 7), `a` IN (1, NULL), `a` NOT IN (1, NULL) FROM `n`",
    ),
    (
        "expressions.slt",
        "SELECT id, p AND a > 0, p OR a > 0, NOT p FROM n",
        "SELECT id, p AND a > 0, p OR a > 0, NOT p FROM n",
    ),
    (
        "expressions.slt",
        "SELECT id, greatest(a, b), least(a, b) FROM n",
        "SELECT id, GREATEST(a, b), LEAST(a, b) FROM n",
    ),
    (
        "expressions.slt",
        "SELECT id FROM n WHERE p IS NOT TRUE",
        "SELECT id FROM n WHERE NOT nvl(p, false)",
    ),
    (
        "case_coalesce.slt",
        "SELECT id, coalesce(x, 0), coalesce(y, 'none'), coalesce(z, x, 0) FROM c",
        "SELECT id, nvl(x, 0), ifnull(y, 'none'), coalesce(z, x, 0) FROM c",
    ),
    (
        "case_coalesce.slt",
        "SELECT id, CASE WHEN x > 0 THEN 'pos' WHEN x < 0 THEN 'neg' ELSE 'zero-or-null' END FROM c",
        "SELECT id, if(x > 0, 'pos', if(x < 0, 'neg', 'zero-or-null')) FROM c",
    ),
    (
        "case_coalesce.slt",
        "SELECT id, CASE WHEN x IS NULL THEN -1 ELSE x * 10 END FROM c",
        "SELECT id, nvl2(x, x * 10, -1) FROM c",
    ),
    (
        "case_coalesce.slt",
        "SELECT id, nullif(x, 0), nullif(y, ''), nullif(z, 1) FROM c",
        "SELECT `id`, nullif(`x`, 0), nullif(`y`, ''), nullif(`z`, 1) FROM `c`",
    ),
    (
        "case_coalesce.slt",
        "SELECT id, CASE x WHEN 1 THEN 'a' WHEN 2 THEN 'b' END FROM c",
        "SELECT id, CASE x WHEN 1 THEN 'a' WHEN 2 THEN 'b' END FROM c",
    ),
    (
        "strings.slt",
        "SELECT id, upper(a), lower(a), length(a), char_length(b) FROM s",
        "SELECT id, ucase(a), lcase(a), length(a), char_length(b) FROM s",
    ),
    (
        "strings.slt",
        "SELECT id, concat_ws(',', a, b, 'z') FROM s",
        "SELECT id, concat_ws(',', a, b, 'z') FROM s",
    ),
    (
        "strings.slt",
        "SELECT id, a || b, a || '-' || b, concat(a, b), concat(a, '-', b) FROM s",
        "SELECT id, concat(a, b), concat(a, '-', b), concat_ws('', a, b), concat_ws('', a, '-', b) FROM s",
    ),
    (
        "strings.slt",
        "SELECT id FROM s WHERE a ILIKE 'h%'",
        "SELECT id FROM s WHERE lower(a) LIKE 'h%'",
    ),
    (
        "strings.slt",
        "SELECT id FROM s WHERE a NOT LIKE '%o%'",
        "SELECT `id` FROM `s` WHERE `a` NOT LIKE '%o%'",
    ),
    (
        "strings.slt",
        "SELECT id, position('o' IN a), strpos(a, 'l') FROM s",
        "SELECT id, instr(a, 'o'), locate('l', a) FROM s",
    ),
    (
        "strings.slt",
        "SELECT id, substring(a FROM 2 FOR 3), substring(a, 3), substr(a, 1, 2) FROM s",
        "SELECT id, substr(a, 2, 3), substring(a, 3), substr(a, 1, 2) FROM s",
    ),
    (
        "strings.slt",
        "SELECT id, replace(a, 'l', 'L'), reverse(a) FROM s",
        "SELECT id, replace(a, 'l', 'L'), reverse(a) FROM s",
    ),
    (
        "strings.slt",
        "SELECT id, left(a, 2), right(a, 2), left(a, -1) FROM s",
        "SELECT id, left(a, 2), right(a, 2), substr(a, 1, length(a) - 1) FROM s",
    ),
    (
        "strings.slt",
        "SELECT id, trim(a), ltrim(a), rtrim(a), btrim(a, ' p') FROM s",
        "SELECT id, trim(a), ltrim(a), rtrim(a), btrim(a, ' p') FROM s",
    ),
    (
        "datetime.slt",
        "SELECT id, d + 1, d - 1, d + 30 FROM ev",
        "SELECT id, date_add(d, 1), date_sub(d, 1), date_add(d, 30) FROM ev",
    ),
    (
        "datetime.slt",
        "SELECT id, d - date '2024-01-01' FROM ev",
        "SELECT id, datediff(d, DATE'2024-01-01') FROM ev",
    ),
    (
        "datetime.slt",
        "SELECT id, extract(year FROM ts), extract(month FROM ts), extract(day FROM ts) FROM ev",
        "SELECT id, year(ts), month(ts), dayofmonth(ts) FROM ev",
    ),
    (
        "datetime.slt",
        "SELECT id, extract(hour FROM ts), extract(minute FROM ts) FROM ev",
        "SELECT id, hour(ts), minute(ts) FROM ev",
    ),
    (
        "datetime.slt",
        "SELECT id, extract(dow FROM d), extract(doy FROM d), extract(quarter FROM d) FROM ev",
        "SELECT id, dayofweek(d) - 1, dayofyear(d), quarter(d) FROM ev",
    ),
    (
        "datetime.slt",
        "SELECT id, date_trunc('month', ts), date_trunc('day', ts), date_trunc('hour', ts) FROM ev",
        "SELECT id, date_trunc('MONTH', ts), date_trunc('DD', ts), date_trunc('HOUR', ts) FROM ev",
    ),
    (
        "aggregates.slt",
        "SELECT region, count(*), sum(qty) FROM sales GROUP BY region",
        "SELECT `region`, count(1), sum(`qty`) FROM `sales` GROUP BY `region`",
    ),
    (
        "aggregates.slt",
        "SELECT count(*), count(qty), count(DISTINCT product), count(DISTINCT region) FROM sales",
        "SELECT count(*), count(qty), count(DISTINCT product), count(DISTINCT region) FROM sales",
    ),
    (
        "aggregates.slt",
        "SELECT region, bool_and(ok), bool_or(ok) FROM sales GROUP BY region",
        "SELECT region, every(ok), some(ok) FROM sales GROUP BY region",
    ),
    (
        "aggregates.slt",
        "SELECT region, sum(qty) FROM sales GROUP BY region HAVING sum(qty) > 3",
        "SELECT region, sum(qty) FROM sales GROUP BY region HAVING sum(qty) > 3",
    ),
    (
        "aggregates.slt",
        "SELECT region, max(product), min(product) FROM sales GROUP BY region",
        "SELECT region, max(product), min(product) FROM sales GROUP BY region",
    ),
    (
        "aggregates.slt",
        "SELECT region, count(*) FILTER (WHERE ok), sum(qty) FILTER (WHERE product = 'apple') FROM sales GROUP BY region",
        "SELECT region, count_if(ok), sum(if(product = 'apple', qty, NULL)) FROM sales GROUP BY region",
    ),
    (
        "joins.slt",
        "SELECT c.name, o.oid FROM cust c JOIN ord o ON c.id = o.id",
        "SELECT `c`.`name`, `o`.`oid` FROM `cust` `c` JOIN `ord` `o` ON `c`.`id` = `o`.`id`",
    ),
    (
        "joins.slt",
        "SELECT c.name, o.oid, o.amount FROM cust c LEFT JOIN ord o ON c.id = o.id",
        "SELECT c.name, o.oid, o.amount FROM cust c LEFT OUTER JOIN ord o ON c.id == o.id",
    ),
    (
        "joins.slt",
        "SELECT c.name, o.oid FROM cust c FULL OUTER JOIN ord o ON c.id = o.id",
        "SELECT c.name, o.oid FROM cust c FULL OUTER JOIN ord o ON c.id = o.id",
    ),
    (
        "joins.slt",
        "SELECT c.name, o.oid FROM cust c RIGHT JOIN ord o ON c.id = o.id",
        "SELECT c.name, o.oid FROM cust c RIGHT OUTER JOIN ord o ON c.id = o.id",
    ),
    (
        "joins.slt",
        "SELECT * FROM t JOIN s ON t.x IS NOT DISTINCT FROM s.y",
        "SELECT * FROM t JOIN s ON t.x <=> s.y",
    ),
    (
        "joins.slt",
        "SELECT count(*) FROM cust CROSS JOIN ord",
        "SELECT count(*) FROM cust CROSS JOIN ord",
    ),
    (
        "subqueries.slt",
        "SELECT x FROM t WHERE EXISTS (SELECT 1 FROM s WHERE s.y = t.x)",
        "SELECT t.x FROM t LEFT SEMI JOIN s ON s.y = t.x",
    ),
    (
        "subqueries.slt",
        "SELECT x FROM t WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.y = t.x)",
        "SELECT t.x FROM t LEFT ANTI JOIN s ON s.y = t.x",
    ),
    (
        "subqueries.slt",
        "SELECT x FROM t WHERE x NOT IN (SELECT y FROM s)",
        "SELECT `x` FROM `t` WHERE `x` NOT IN (SELECT `y` FROM `s`)",
    ),
    (
        "subqueries.slt",
        "SELECT c.id, (SELECT count(*) FROM o WHERE o.c = c.id) FROM c",
        "SELECT cc.id, (SELECT count(*) FROM o WHERE o.c = cc.id) FROM c AS cc",
    ),
    (
        "subqueries.slt",
        "WITH big AS (SELECT * FROM o WHERE amount > 4) SELECT oid FROM big",
        "WITH big AS (SELECT * FROM o WHERE amount > 4) SELECT oid FROM big",
    ),
    (
        "setops.slt",
        "SELECT v, w FROM a EXCEPT ALL SELECT v, w FROM b",
        "SELECT v, w FROM a EXCEPT ALL SELECT v, w FROM b",
    ),
    (
        "setops.slt",
        "SELECT v, w FROM a INTERSECT SELECT v, w FROM b",
        "SELECT v, w FROM a INTERSECT DISTINCT SELECT v, w FROM b",
    ),
    (
        "setops.slt",
        "SELECT v FROM a EXCEPT SELECT v FROM b",
        "SELECT v FROM a MINUS SELECT v FROM b",
    ),
    (
        "setops.slt",
        "SELECT v, w FROM a UNION ALL SELECT v, w FROM b",
        "SELECT v, w FROM a UNION ALL SELECT v, w FROM b",
    ),
    ("order_limit.slt", "SELECT x FROM p ORDER BY x", "SELECT x FROM p ORDER BY x ASC NULLS LAST"),
    (
        "order_limit.slt",
        "SELECT x FROM p ORDER BY x DESC",
        "SELECT x FROM p ORDER BY x DESC NULLS FIRST",
    ),
    (
        "order_limit.slt",
        "SELECT g, x FROM p ORDER BY x, g LIMIT 3",
        "SELECT g, x FROM p ORDER BY x NULLS LAST, g NULLS LAST LIMIT 3",
    ),
    (
        "order_limit.slt",
        "SELECT g, x FROM p ORDER BY x, g LIMIT 3 OFFSET 2",
        "SELECT g, x FROM p ORDER BY x NULLS LAST, g NULLS LAST LIMIT 3 OFFSET 2",
    ),
    (
        "window.slt",
        "SELECT g, x, row_number() OVER (PARTITION BY g ORDER BY x, y) FROM w",
        "SELECT g, x, row_number() OVER (PARTITION BY g ORDER BY x NULLS LAST, y NULLS LAST) FROM w",
    ),
    (
        "window.slt",
        "SELECT g, x, rank() OVER (PARTITION BY g ORDER BY x) FROM w",
        "SELECT `g`, `x`, rank() OVER (PARTITION BY `g` ORDER BY `x` NULLS LAST) FROM `w`",
    ),
    (
        "window.slt",
        "SELECT g, x, y, lag(x) OVER (PARTITION BY g ORDER BY x, y) FROM w",
        "SELECT g, x, y, lag(x) OVER (PARTITION BY g ORDER BY x NULLS LAST, y NULLS LAST) FROM w",
    ),
    (
        "window.slt",
        "SELECT g, x, sum(x) OVER (PARTITION BY g) FROM w",
        "SELECT g, x, sum(x) OVER (PARTITION BY g) FROM w",
    ),
    (
        "window.slt",
        "SELECT g, x, y FROM (SELECT g, x, y, row_number() OVER (PARTITION BY g ORDER BY x DESC, y DESC) AS rn FROM w) r WHERE rn <= 2",
        "SELECT g, x, y FROM (SELECT g, x, y, row_number() OVER (PARTITION BY g ORDER BY x DESC NULLS FIRST, y DESC NULLS FIRST) AS rn FROM w) r WHERE rn <= 2",
    ),
    (
        "numeric_functions.slt",
        "SELECT id, abs(i), abs(d), abs(f) FROM m",
        "SELECT id, abs(i), abs(d), abs(f) FROM m",
    ),
    (
        "numeric_functions.slt",
        "SELECT id, mod(i, 3), i % 3, mod(d, 1) FROM m",
        "SELECT id, mod(i, 3), i % 3, mod(d, 1) FROM m",
    ),
    (
        "grouping_sets.slt",
        "SELECT region, product, count(*) FROM gs GROUP BY GROUPING SETS ((region), (product), ())",
        "SELECT region, product, count(*) FROM gs GROUP BY GROUPING SETS ((region), (product), ())",
    ),
    (
        "grouping_sets.slt",
        "SELECT region, product, grouping(region), grouping(product), grouping(region, product), count(*) FROM gs GROUP BY ROLLUP (region, product)",
        "SELECT region, product, grouping(region), grouping(product), grouping_id(region, product), count(*) FROM gs GROUP BY region, product WITH ROLLUP",
    ),
    (
        "grouping_sets.slt",
        "SELECT region, product, sum(qty) FROM gs GROUP BY CUBE (region, product)",
        "SELECT region, product, sum(qty) FROM gs GROUP BY region, product WITH CUBE",
    ),
    (
        "grouping_sets.slt",
        "SELECT region, yr, product, sum(qty) FROM gs GROUP BY region, ROLLUP (yr, product)",
        "SELECT region, yr, product, sum(qty) FROM gs GROUP BY region, ROLLUP (yr, product)",
    ),
]


# Spark texts spate does not answer yet (strict xfails of the spate test; remove when fixed).
GAPS: dict[str, str] = {}


@dataclass
class Expected:
    """PostgreSQL's answer to the corpus query, and the tables as they were when it ran."""

    rows: list[Any]
    ordered: bool
    tables: dict[str, tuple[list[tuple[str, str, int | None, int | None]], list[Any]]]


def _cases(*, gaps: bool = False) -> list[Any]:
    return [
        pytest.param(
            *c,
            id=f"{Path(c[0]).stem}:{i}",
            marks=[pytest.mark.xfail(strict=True, reason=GAPS[c[2]])]
            if gaps and c[2] in GAPS
            else [],
        )
        for i, c in enumerate(CASES)
    ]


def _statements_before(file: str, sql: str) -> tuple[list[str], bool]:
    """The file's ``statement ok`` texts before ``sql``, and whether ``sql`` is ordered."""
    f = parse_file(SLT_DIR / file)
    out: list[str] = []
    for r in f.records:
        if r.kind == "query" and r.sql == sql:
            return out, r.sort == "nosort"
        if r.kind == "statement" and not r.expect_error and r.runs_on("postgresql"):
            out.append(r.sql)
    raise AssertionError(f"{file} has no query {sql!r}")


def test_every_case_is_a_corpus_query() -> None:
    assert len(CASES) >= 40
    assert len({c[1] for c in CASES}) == len(CASES)
    assert set(GAPS) <= {c[2] for c in CASES}
    print(f"Spark dialect: {len(CASES)} queries, {len(GAPS)} known gaps")
    for file, sql, _ in CASES:
        _statements_before(file, sql)


@pytest.fixture(scope="module")
def expected(postgres_url: str) -> Callable[[str, str], Expected]:
    cache: dict[tuple[str, str], Expected] = {}

    def get(file: str, sql: str) -> Expected:
        if (file, sql) not in cache:
            statements, ordered = _statements_before(file, sql)
            with PgScratch(postgres_url, "spark") as pg:
                for s in statements:
                    pg.execute(s)
                rows = pg.query(sql)[2]
                models = load(pg, pg.tables())
                tables = {
                    n: ([(c.name, c.type, c.scale, c.length) for c in m.columns], m.rows)
                    for n, m in models.items()
                }
            cache[(file, sql)] = Expected(rows, ordered, tables)
        return cache[(file, sql)]

    return get


def _spark_type(pg_type: str, scale: int | None) -> str:
    return {
        "bigint": "BIGINT",
        "integer": "INT",
        "smallint": "SMALLINT",
        "double precision": "DOUBLE",
        "real": "FLOAT",
        "text": "STRING",
        "character varying": "STRING",
        "boolean": "BOOLEAN",
        "date": "DATE",
        "timestamp without time zone": "TIMESTAMP_NTZ",
    }.get(pg_type) or f"DECIMAL(38, {scale if scale is not None else 18})"


_SPARK_TABLES: dict[str, Any] = {}


def _naive_utc(table: pa.Table) -> pa.Table:
    """Spark's TIMESTAMP is a UTC instant here (session time zone UTC): compare it as the
    naive timestamp it prints as, like PostgreSQL's ``timestamp``."""
    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


@pytest.mark.parametrize(("file", "pg_sql", "spark_sql"), _cases())
def test_spark_itself_answers_the_spark_text_like_postgresql(
    file: str,
    pg_sql: str,
    spark_sql: str,
    expected: Callable[[str, str], Expected],
    spark: SparkSession,
) -> None:
    """The pair asks the same question: Spark's answer to the Spark text is PostgreSQL's."""
    want = expected(file, pg_sql)
    state = (file, tuple(_statements_before(file, pg_sql)[0]))
    if _SPARK_TABLES.get("state") != state:  # the same tables as the previous case: reuse
        for name in _SPARK_TABLES.get("names", ()):
            spark.catalog.dropTempView(name)
        for name, (columns, rows) in want.tables.items():
            schema = ", ".join(f"`{c}` {_spark_type(t, s)}" for c, t, s, _ in columns)
            spark.createDataFrame(rows, schema).createOrReplaceTempView(name)
        _SPARK_TABLES.update(state=state, names=tuple(want.tables))
    got = _naive_utc(spark.sql(spark_sql).toArrow())
    problem = compare(want.rows, got, ordered=want.ordered)
    assert problem is None, problem


@pytest.fixture(scope="module")
def spate_env(postgres_url: str, corpus_env: Environment) -> Environment:
    """The package's Environment with the corpus cluster (``corpus_env``)."""
    corpus_env.sql(f"SET cluster = {CLUSTER}")
    return corpus_env


@pytest.mark.timeout(900)  # the first one waits for the replica to start
@pytest.mark.parametrize(("file", "pg_sql", "spark_sql"), _cases(gaps=True))
def test_spate_answers_the_spark_text_like_postgresql(
    file: str,
    pg_sql: str,
    spark_sql: str,
    expected: Callable[[str, str], Expected],
    spate_env: Environment,
) -> None:
    want = expected(file, pg_sql)
    statements, _ = _statements_before(file, pg_sql)
    before = set(spate_env.names())
    try:
        for s in statements:
            spate_env.sql(s)
        got = spate_env.sql(spark_sql, dialect="spark")
    finally:
        for name in sorted(set(spate_env.names()) - before):
            try:
                spate_env.drop(name, cascade=True)
            except Exception:  # dropped already by a cascade
                continue
    assert isinstance(got, pa.Table)
    problem = compare(want.rows, got, ordered=want.ordered)
    assert problem is None, problem
