"""A read that needs a materialized view whose dataflow failed for good (here: its input's
batch is corrupt, so Spark cannot read it — not an evaluation error) fails at once, naming the
view and why, instead of waiting out its whole timeout for an upper that no longer moves. (A
SELECT over such a view used to time out, blaming the inputs' uppers.) A SUBSCRIBE to it ends
likewise (it used to wait forever). A real compute replica process runs the view."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.environment.view_failures import ViewFailed
from spate.errors import ReadFailed, ReadTimeout
from spate.plan.builder import col, count, sum_
from spate.repr import INT64, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DESC = RelationDesc.of(("k", INT64, False), ("x", INT64, False))
TIMEOUT = 120.0


def _corrupt_batches(data: Path, shard: object) -> int:
    files = [f for f in (data / "blob" / str(shard)).rglob("*") if f.is_file()]
    for f in files:
        raw = bytearray(f.read_bytes())
        for i in range(len(raw) // 4, len(raw) // 2):
            raw[i] ^= 0xFF
        f.write_bytes(bytes(raw))
    return len(files)


def test_a_read_over_a_failed_view_fails_promptly_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_cluster("c", replicas=1)
        env.create_table("warm", DESC)  # the replica is up and Spark warm before timing
        env.create_materialized_view("warm_mv", env.get("warm"), cluster="c")
        assert env.select("warm_mv", cluster="c", timeout=TIMEOUT).num_rows == 0
        env.create_table("t", DESC)
        env.insert("t", [(1, 5), (2, 7)])
        found = env.runtime.catalog.find("t")
        assert found is not None
        shard = env.runtime.storage.collection_metadata(found.id).shard
        assert _corrupt_batches(data, shard) > 0
        sums = env.get("t").reduce(["k"], total=sum_(col("x")))
        env.create_materialized_view("sums", sums, cluster="c")
        started = time.monotonic()
        with pytest.raises(ReadFailed) as caught:
            env.select(env.get("sums").reduce([], n=count()), cluster="c", timeout=TIMEOUT)
        took = time.monotonic() - started
        assert not isinstance(caught.value, ReadTimeout)
        assert "sums" in str(caught.value) and "failed" in str(caught.value), caught.value
        assert took < TIMEOUT / 4, f"the read took {took:.0f} s"

        # A subscribe to it (or to a query over it), through the API and in SQL, ends the
        # same way instead of waiting for an upper that no longer moves.
        env.sql("SET cluster = c")
        subscribes = {
            "api": lambda: env.subscribe("sums", cluster="c", timeout=TIMEOUT),
            "api, query over it": lambda: env.subscribe(
                env.get("sums").reduce([], n=count()), cluster="c", timeout=TIMEOUT
            ),
            "sql": lambda: env.sql("SUBSCRIBE sums"),
        }
        for how, start in subscribes.items():
            started = time.monotonic()
            with pytest.raises(ViewFailed) as ended:
                for _ in start():
                    pass
            took = time.monotonic() - started
            assert "sums" in str(ended.value) and "failed" in str(ended.value), (how, ended.value)
            assert took < TIMEOUT / 4, f"the {how} subscribe took {took:.0f} s"
