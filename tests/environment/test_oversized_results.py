"""A read whose answer is larger than a frame fails on its own, with an error that says so;
the cluster keeps answering other reads (a real compute replica process)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.environment.reads import ReadFailed
from spate.repr import INT64, TEXT, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DESC = RelationDesc.of(("k", INT64, False), ("s", TEXT, False))
MIB = 1024 * 1024


def test_an_oversized_read_fails_alone_and_the_cluster_keeps_serving(tmp_path: Path) -> None:
    env = Environment.open(tmp_path / "data")
    try:
        env.create_cluster("c", replicas=1)
        env.create_table("small", DESC)
        env.insert("small", [(1, "one")])
        assert env.select("small", cluster="c", timeout=120).num_rows == 1
        env.create_table("big", DESC)
        for chunk in range(8):  # 72 MiB: more than the 64 MiB frame limit
            env.insert("big", [(chunk * 9 + i, "x" * MIB) for i in range(9)])
        begin = time.monotonic()
        with pytest.raises(ReadFailed, match=r"bytes.*frame"):  # (the replica's answer)
            env.select("big", cluster="c", timeout=60, small_reads=False)
        assert time.monotonic() - begin < 50, "the oversized read should fail, not time out"
        # The replica still answers, on the same connection or after a reset.
        env.insert("small", [(2, "two")])
        assert env.select("small", cluster="c", timeout=60).num_rows == 2
        assert env.select("big", cluster="c", limit=3, timeout=60).num_rows == 3
    finally:
        env.close()
