"""A subscribe whose input is dropped ends with an error that names the dropped object (it
used to wait forever); a real compute replica process runs the subscribes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spate.environment.api import Environment
from spate.environment.reads import ReadFailed
from spate.plan.builder import col
from spate.repr import INT64, TEXT, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


def _drain(batches: Iterator[object]) -> None:
    for _ in batches:
        pass


def test_a_subscribe_ends_with_an_error_naming_its_dropped_input(cluster_env: Environment) -> None:
    env = cluster_env
    env.create_table("t", DESC)
    env.create_table("u", DESC)
    env.insert("t", [(1, "a")])
    env.insert("u", [(1, "a")])
    env.create_view("big_u", env.get("u").filter(col("k") > 0))

    direct = env.subscribe("t", cluster="c", timeout=120)
    first = next(direct)
    assert [(row, diff) for _, row, diff in first] == [((1, "a"), 1)]
    env.drop("t")
    with pytest.raises(ReadFailed, match=r"table t .*dropped"):
        _drain(direct)

    through_view = env.subscribe("big_u", cluster="c", timeout=120)
    next(through_view)
    assert env.drop("u", cascade=True) == ["big_u", "u"]
    with pytest.raises(ReadFailed, match=r"(table u|view big_u) .*dropped"):
        _drain(through_view)
    # The cluster still serves other reads.
    env.create_table("w", DESC)
    env.insert("w", [(2, "b")])
    assert env.select("w", cluster="c", timeout=60).num_rows == 1
