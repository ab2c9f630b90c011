"""The data a source finds when it is created is visible to the first read issued after
``create_source`` returns (a file already in a file source's directory)."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.environment.api import Environment
from spate.protocol.storage_desc import FileFormat, FileSource
from spate.repr import INT64, TEXT, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


def test_a_file_present_at_creation_is_in_the_first_read(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    pq.write_table(
        pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}),
        incoming / "part-0.parquet",
    )
    with Environment.open(tmp_path / "data") as env:
        env.create_source("f", FileSource(str(incoming), FileFormat.PARQUET), desc=DESC)
        begin = time.monotonic()
        rows = env.select("f_files", timeout=60)
        took = time.monotonic() - begin
        assert sorted(r["k"] for r in rows.to_pylist()) == [1, 2, 3], f"after {took:.1f} s"


def test_a_real_time_recency_read_sees_every_file_present_when_it_began(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()

    def add(n: int) -> None:
        tmp = tmp_path / f".part-{n}.parquet"
        pq.write_table(pa.table({"k": pa.array([n], pa.int64()), "v": [f"r{n}"]}), tmp)
        tmp.rename(incoming / f"part-{n}.parquet")  # complete when it appears

    add(0)
    with Environment.open(tmp_path / "data") as env:
        source = FileSource(str(incoming), FileFormat.PARQUET, poll_interval_ms=4000)
        env.create_source("f", source, desc=DESC)
        assert env.select("f_files", timeout=60).num_rows == 1
        add(1)
        add(2)
        rows = env.select("f_files", real_time_recency=True, timeout=60)
        assert sorted(r["k"] for r in rows.to_pylist()) == [0, 1, 2]
