"""Evaluation errors inside table functions, window functions, temporal filters, a join feeding
a reduce on its key, and the SQL functions themselves make a maintained view's reads fail (naming
the view, with the SQLSTATE) until the offending row is deleted, and stop nothing: the other
views on the cluster keep updating, and after the delete every view equals its recomputation.
(Each used to stop its view's dataflow for good.) A real compute replica process runs the
views."""

from __future__ import annotations

import pytest

from spate.environment.api import Environment
from spate.errors import EvaluationFailed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SETUP = [
    "CREATE TABLE t (k bigint NOT NULL, x bigint NOT NULL, until timestamp)",
    "CREATE TABLE u (k bigint NOT NULL, y bigint NOT NULL)",
    "INSERT INTO t VALUES (1, 5, '2999-01-01 00:00:00'), (2, 2, '2999-01-01 00:00:00')",
    "INSERT INTO u VALUES (1, 2), (2, 1), (3, 1)",
]
# name: (query, SQLSTATE on the row (3, 0))
VIEWS = {
    "series": ("SELECT t.k, g FROM t, generate_series(1, 10 / t.x) AS g", "22012"),
    "lags": ("SELECT k, x, lag(10 / x) OVER (PARTITION BY k ORDER BY x) AS prev FROM t", "22012"),
    "live": ("SELECT k FROM t WHERE mz_now() <= until + interval '1 day' * (10 / x)", "22012"),
    "ratios": (
        "SELECT t.k, count(*) AS n, sum(u.y) AS total FROM t JOIN u ON t.k = u.k "
        "WHERE u.y * 10 / t.x > 1 GROUP BY t.k",
        "22012",
    ),
    "roots": ("SELECT k, sqrt(x - 1) AS r FROM t", "2201F"),
}
BAD = "(3, 0, '2999-01-01 00:00:00')"


def test_views_in_error_fail_reads_until_the_row_is_deleted_and_the_cluster_goes_on(
    cluster_env: Environment,
) -> None:
    env = cluster_env
    env.sql("SET cluster = c")
    for s in SETUP:
        env.sql(s)
    for name, (query, _) in VIEWS.items():
        env.sql(f"CREATE MATERIALIZED VIEW {name} AS {query}")
        env.sql(f"CREATE DEFAULT INDEX ON {name}")
    env.sql("CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n FROM t")
    env.sql("CREATE DEFAULT INDEX ON total")

    def rows(query: str) -> list[tuple[object, ...]]:
        out = env.sql(query).to_pylist()  # type: ignore[union-attr]
        return sorted((tuple(r.values()) for r in out), key=repr)

    for name, (query, _) in VIEWS.items():
        assert rows(f"SELECT * FROM {name}") == rows(query), name
    env.sql(f"INSERT INTO t VALUES {BAD}")
    for name, (_, sqlstate) in VIEWS.items():
        with pytest.raises(EvaluationFailed) as caught:
            env.sql(f"SELECT * FROM {name}")
        assert caught.value.sqlstate == sqlstate, (name, caught.value)
        assert name in str(caught.value) and "x=0" in str(caught.value), str(caught.value)
    # nothing stopped: the cluster's views go on updating
    env.sql("INSERT INTO t VALUES (4, 4, '2999-01-01 00:00:00')")
    assert rows("SELECT * FROM total") == [(4,)]
    with pytest.raises(EvaluationFailed):
        env.sql("SELECT * FROM series")
    env.sql("DELETE FROM t WHERE x = 0")
    for name, (query, _) in VIEWS.items():
        assert rows(f"SELECT * FROM {name}") == rows(query), name
    assert rows("SELECT * FROM total") == [(3,)]
