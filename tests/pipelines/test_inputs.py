"""File inputs: a directory's files in a spate table, brought up to date file by file — a new
file inserts its rows, a replaced file swaps its rows, a deleted file retracts them — and a
second sync with nothing changed writes nothing. (Tables only: no replica, no Spark job.)"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.pipelines.inputs import FILE_COLUMN, FileInput, input_desc, sync_input

if TYPE_CHECKING:
    from spate.environment.api import Environment


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    from spate.environment.api import Environment

    e = Environment.open(tmp_path / "data")
    try:
        yield e
    finally:
        e.close()


def _write(d: Path, name: str, ks: list[int]) -> None:
    tmp = d / f".{name}"
    pq.write_table(pa.table({"k": pa.array(ks, pa.int64()), "v": [f"v{k}" for k in ks]}), tmp)
    tmp.rename(d / name)


def _rows(env: Environment, inp: FileInput) -> list[tuple[str, int]]:
    t = env.select(inp.table)
    return sorted(zip(t.column(FILE_COLUMN).to_pylist(), t.column("k").to_pylist(), strict=True))


def test_new_replaced_and_deleted_files(env: Environment, tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    _write(d, "a.parquet", [1, 2])
    _write(d, "b.parquet", [3])
    (d / "_SUCCESS").write_text("")  # not data, as for Spark
    inp = FileInput("_in", "parquet", str(d), columns=(("k", "int64"), ("v", "string")))
    env.create_table(inp.table, input_desc(inp))
    assert sync_input(env, inp) == 2
    assert _rows(env, inp) == [("a.parquet", 1), ("a.parquet", 2), ("b.parquet", 3)]
    assert sync_input(env, inp) == 0  # nothing changed: nothing written

    time.sleep(0.01)
    _write(d, "a.parquet", [7])  # replaced
    _write(d, "c.parquet", [8, 8])  # new (a duplicate row stays a duplicate)
    assert sync_input(env, inp) == 2
    assert _rows(env, inp) == [
        ("a.parquet", 7),
        ("b.parquet", 3),
        ("c.parquet", 8),
        ("c.parquet", 8),
    ]

    os.remove(d / "b.parquet")  # deleted
    assert sync_input(env, inp) == 1
    assert _rows(env, inp) == [("a.parquet", 7), ("c.parquet", 8), ("c.parquet", 8)]
