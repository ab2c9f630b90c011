"""A window aggregate that overflows inside a materialized view is an error as data: a running
``sum(x)`` of int64 passing 2**63 makes reads of the view fail naming the view, the aggregate
and a sample row, status() shows the error, and deleting the row makes reads succeed again with
the right answer. (It used to fail the view's dataflow for good.) A real compute replica
process runs the view."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import EvaluationFailed
from spate.plan.builder import col, sum_
from spate.repr import INT64, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DESC = RelationDesc.of(("k", INT64, False), ("x", INT64, False))
BIG = 2**63 - 3


def _error(env: Environment, name: str, *, present: bool, timeout: float = 60) -> str | None:
    deadline = time.monotonic() + timeout
    while True:
        c = env.status().collection(name)
        if (c.error is not None) == present:
            return c.error
        if time.monotonic() > deadline:
            raise AssertionError(f"status of {name}: error={c.error!r}, wanted present={present}")
        time.sleep(0.5)


def test_an_overflowing_running_sum_in_a_view_fails_reads_until_the_row_is_deleted(
    tmp_path: Path,
) -> None:
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=1)
        env.create_table("t", DESC)
        env.insert("t", [(1, 5), (1, 2), (2, 7)])
        running = env.get("t").window(["k"], order_by=["x"], total=sum_(col("x")))
        env.create_materialized_view("running", running, cluster="c")
        expected = [
            {"k": 1, "x": 2, "total": 2},
            {"k": 1, "x": 5, "total": 7},
            {"k": 2, "x": 7, "total": 7},
        ]

        def rows() -> list[dict[str, object]]:
            return sorted(env.select("running", cluster="c", timeout=120).to_pylist(), key=str)

        assert rows() == sorted(expected, key=str)
        env.insert("t", [(1, BIG)])  # k=1's running sum passes 2**63 - 1 at its last row
        with pytest.raises(EvaluationFailed) as caught:
            env.select("running", cluster="c", timeout=120)
        text = str(caught.value)
        assert "running" in text and "bigint out of range" in text, text
        assert "sum(x)" in text and "k=1" in text, text  # the aggregate and a sample row
        assert caught.value.sqlstate == "22003"
        problem = _error(env, "running", present=True)
        assert problem is not None and "bigint out of range" in problem
        env.delete("t", [(1, BIG)])
        assert rows() == sorted(expected, key=str)
        assert _error(env, "running", present=False) is None
        env.insert("t", [(2, 1)])  # and the view goes on being maintained
        assert rows() == sorted(
            [*expected[:2], {"k": 2, "x": 1, "total": 1}, {"k": 2, "x": 7, "total": 8}], key=str
        )
