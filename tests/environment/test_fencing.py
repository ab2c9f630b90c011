"""An environment opened again elsewhere fences the older one: after B opens the data
directory, A can change nothing in the catalog (create, drop, alter, clusters), and nothing B
keeps writing is lost."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.environment.catalog_store import EnvironmentFenced
from spate.plan.builder import col
from spate.repr import INT64, TEXT, RelationDesc
from spate.storage.controller.errors import ControllerFenced

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))

CHANGES: dict[str, Callable[[Environment], object]] = {
    "drop": lambda a: a.drop("t"),
    "drop-cascade": lambda a: a.drop("t", cascade=True),
    "create_view": lambda a: a.create_view("v", a.get("t").filter(col("k") > 1)),
    "create_table": lambda a: a.create_table("x", DESC),
    "set_retain_history": lambda a: a.set_retain_history("t", 5_000),
    "create_cluster": lambda a: a.create_cluster("c", replicas=0),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_fenced_environment_cannot_change_the_catalog(tmp_path: Path, change: str) -> None:
    data = tmp_path / "data"
    a = Environment.open(data)
    b: Environment | None = None
    try:
        a.create_table("t", DESC)
        a.insert("t", [(1, "a")])
        b = Environment.open(data)
        # (A new table's storage collection is refused first, by the storage controller.)
        with pytest.raises((EnvironmentFenced, ControllerFenced), match=r"epoch 1.*epoch 2"):
            CHANGES[change](a)
        b.insert("t", [(2, "b")])
        assert b.names() == ["t"]
        assert b.select("t").num_rows == 2
    finally:
        a.close()
        if b is not None:
            b.close()
    with Environment.open(data) as c:
        assert c.names() == ["t"]
        assert sorted(r["k"] for r in c.select("t").to_pylist()) == [1, 2]
        assert c.status().collection("t") is not None
