"""A table's rows have one identity for writes and every read path: deleting ``-0.0`` deletes
``0.0``, and a NaN row can be deleted (NaN equals NaN, as in PostgreSQL)."""

from __future__ import annotations

import math

import pytest

from spate.environment.api import Environment
from spate.environment.tables import RowsNotFound
from spate.repr import FLOAT64, INT64, RelationDesc

DESC = RelationDesc.of(("k", INT64, False), ("x", FLOAT64))


def test_deleting_negative_zero_deletes_zero(env: Environment) -> None:
    env.create_table("t", DESC)
    env.insert("t", [(1, 0.0)])
    assert env.delete("t", [(1, -0.0)]).rows == 1
    assert env.select("t").num_rows == 0
    # And the other way round; the stored value is 0.0 whichever sign was written.
    env.insert("t", [(2, -0.0)])
    (value,) = env.select("t").column("x").to_pylist()
    assert math.copysign(1.0, value) == 1.0
    assert env.delete("t", [(2, 0.0)]).rows == 1
    assert env.select("t").num_rows == 0
    with pytest.raises(RowsNotFound):
        env.delete("t", [(2, 0.0)])


def test_a_nan_row_can_be_deleted_and_updated(env: Environment) -> None:
    env.create_table("t", DESC)
    env.insert("t", [(1, float("nan")), (1, float("nan")), (2, 1.0)])
    assert env.delete("t", [(1, float("nan"))]).rows == 1
    env.update("t", [((1, float("nan")), (1, 5.0))])
    assert sorted(env.select("t").to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "x": 5.0},
        {"k": 2, "x": 1.0},
    ]
    assert env.delete("t", where={"k": 2}).rows == 1
    assert env.select("t").to_pylist() == [{"k": 1, "x": 5.0}]


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_every_read_path_agrees_on_zero_and_nan(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Through a cluster (a real compute replica) as without one: the same rows, and the same
    count, after deleting -0.0 for 0.0 and NaN for NaN."""
    from spate.plan.builder import count

    with Environment.open(tmp_path / "data") as env:
        env.create_table("t", DESC)
        env.insert("t", [(1, 0.0), (2, float("nan")), (3, 1.5)])
        assert env.delete("t", [(1, -0.0)]).rows == 1
        assert env.delete("t", [(2, float("nan"))]).rows == 1
        without_cluster = sorted(r["k"] for r in env.select("t").to_pylist())
        env.create_cluster("c", replicas=1)
        through_cluster = sorted(
            r["k"] for r in env.select("t", cluster="c", timeout=300).to_pylist()
        )
        counted = env.select(env.get("t").reduce([], n=count()), cluster="c", timeout=300)
        assert without_cluster == through_cluster == [3]
        assert counted.to_pylist() == [{"n": 1}]
