"""Evaluation errors inside maintained views are data (error collections): reads of a view in
error fail naming the view, the expression and a sample row, status() shows the error, and
retracting the offending input makes reads succeed again with the right answer. (An int64
overflow in a materialized view's sum used to stop the view for good: reads timed out blaming
the inputs' uppers.) A real compute replica process runs the views."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import EvaluationFailed, ReadFailed
from spate.plan.builder import col, count, sum_
from spate.repr import INT64, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DESC = RelationDesc.of(("k", INT64, False), ("x", INT64, False))
BIG = 2**63 - 1


def _status_error(env: Environment, name: str, *, present: bool, timeout: float = 60) -> str | None:
    deadline = time.monotonic() + timeout
    while True:
        c = env.status().collection(name)
        if (c.error is not None) == present:
            return c.error
        if time.monotonic() > deadline:
            raise AssertionError(f"status of {name}: error={c.error!r}, wanted present={present}")
        time.sleep(0.5)


def test_view_with_overflow_fails_reads_then_recovers_on_retraction(tmp_path: Path) -> None:
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=1)
        env.create_table("t", DESC)
        env.insert("t", [(1, 5), (2, 7)])
        sums = env.get("t").reduce(["k"], total=sum_(col("x")), n=count())
        env.create_materialized_view("sums", sums, cluster="c")
        assert sorted(env.select("sums", cluster="c", timeout=120).to_pylist(), key=str) == [
            {"k": 1, "total": 5, "n": 1},
            {"k": 2, "total": 7, "n": 1},
        ]
        env.insert("t", [(1, BIG)])  # key 1's sum no longer fits 64 bits
        with pytest.raises(EvaluationFailed) as caught:
            env.select("sums", cluster="c", timeout=120)
        text = str(caught.value)
        assert "sums" in text and "bigint out of range" in text, text
        assert "sum(x)" in text and "k=1" in text, text  # the expression and a sample row
        assert caught.value.sqlstate == "22003"
        assert isinstance(caught.value, ReadFailed)
        problem = _status_error(env, "sums", present=True)
        assert problem is not None and "bigint out of range" in problem
        assert env.status().collection("sums").status == "error"
        # the other views of the cluster are fine
        env.create_materialized_view("count_all", env.get("t").reduce([], n=count()), cluster="c")
        assert env.select("count_all", cluster="c", timeout=120).to_pylist() == [{"n": 3}]

        env.delete("t", [(1, BIG)])
        assert sorted(env.select("sums", cluster="c", timeout=120).to_pylist(), key=str) == [
            {"k": 1, "total": 5, "n": 1},
            {"k": 2, "total": 7, "n": 1},
        ]
        assert _status_error(env, "sums", present=False) is None
        # and the view goes on being maintained
        env.insert("t", [(2, 1)])
        assert sorted(env.select("sums", cluster="c", timeout=120).to_pylist(), key=str) == [
            {"k": 1, "total": 5, "n": 1},
            {"k": 2, "total": 8, "n": 2},
        ]
