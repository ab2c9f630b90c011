"""File inputs: a directory's files in a spate table, brought up to date file by file — a new
file inserts its rows, a replaced file swaps its rows, a deleted file retracts them — and a
second sync with nothing changed writes nothing. Only changed files are read (the inputs'
frontier, persisted, says which), and a sync stopped between a file's write and its record
resumes without reading the file twice. (Tables only: no replica, no Spark job; Spark only
reads the same CSV and JSON files to compare.)"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.pipelines import inputs
from spate.pipelines.file_frontier import FileFrontier
from spate.pipelines.inputs import FILE_COLUMN, FileInput, Synced, input_desc, sync_input
from tests.pipelines._example import normalized

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
    frontier = FileFrontier(tmp_path)
    assert sync_input(env, inp, frontier) == Synced(files=2, rows=3)
    assert _rows(env, inp) == [("a.parquet", 1), ("a.parquet", 2), ("b.parquet", 3)]
    assert sync_input(env, inp, frontier) == Synced()  # nothing changed: nothing written

    time.sleep(0.01)
    _write(d, "a.parquet", [7])  # replaced
    _write(d, "c.parquet", [8, 8])  # new (a duplicate row stays a duplicate)
    assert sync_input(env, inp, FileFrontier(tmp_path)) == Synced(files=2, rows=3)
    assert _rows(env, inp) == [
        ("a.parquet", 7),
        ("b.parquet", 3),
        ("c.parquet", 8),
        ("c.parquet", 8),
    ]

    os.remove(d / "b.parquet")  # deleted
    assert sync_input(env, inp, FileFrontier(tmp_path)) == Synced(files=1, rows=0)
    assert _rows(env, inp) == [("a.parquet", 7), ("c.parquet", 8), ("c.parquet", 8)]


def _input(env: Environment, d: Path) -> FileInput:
    inp = FileInput("_in", "parquet", str(d), columns=(("k", "int64"), ("v", "string")))
    env.create_table(inp.table, input_desc(inp))
    return inp


def test_only_changed_files_are_read(
    env: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "in"
    d.mkdir()
    for i in range(20):
        _write(d, f"f{i:02d}.parquet", list(range(i * 10, i * 10 + 10)))
    inp = _input(env, d)
    frontier = FileFrontier(tmp_path)
    frontier.reset(inp.table, {})
    assert sync_input(env, inp, frontier) == Synced(files=20, rows=200)

    read: list[str] = []
    real_read = inputs._read
    monkeypatch.setattr(
        inputs, "_read", lambda i, p, **kw: read.append(p.name) or real_read(i, p, **kw)
    )

    def no_scan(*_: object) -> dict[str, str]:
        raise AssertionError("the input table was read to find what changed")

    monkeypatch.setattr(inputs, "held_versions", no_scan)
    _write(d, "f20.parquet", [500, 501, 502])
    time.sleep(0.01)
    _write(d, "f03.parquet", [900])  # replaced
    # a new process: the frontier as persisted
    assert sync_input(env, inp, FileFrontier(tmp_path)) == Synced(files=2, rows=4)
    assert sorted(read) == ["f03.parquet", "f20.parquet"]
    got = _rows(env, inp)
    assert len(got) == 200 - 10 + 4
    assert ("f03.parquet", 900) in got and ("f03.parquet", 30) not in got


@pytest.mark.parametrize("stop_after", ["delete", "insert"])
def test_a_stop_between_write_and_record_resumes_exactly(
    env: Environment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_after: str
) -> None:
    d = tmp_path / "in"
    d.mkdir()
    _write(d, "a.parquet", [1, 2])
    inp = _input(env, d)
    frontier = FileFrontier(tmp_path)
    frontier.reset(inp.table, {})
    sync_input(env, inp, frontier)
    time.sleep(0.01)
    _write(d, "a.parquet", [3, 4, 5])  # replaced: a delete, then an insert

    class Stop(Exception):
        pass

    def stop(*_: object, **__: object) -> None:
        raise Stop

    if stop_after == "delete":
        monkeypatch.setattr(env, "insert", stop)
    else:
        monkeypatch.setattr(FileFrontier, "commit", stop)
    with pytest.raises(Stop):
        sync_input(env, inp, FileFrontier(tmp_path))
    monkeypatch.undo()
    resumed = FileFrontier(tmp_path)
    assert resumed.pending(inp.table) == ["a.parquet"]
    rows = 0 if stop_after == "insert" else 3  # a file already in the table is not read again
    assert sync_input(env, inp, resumed) == Synced(files=rows // 3, rows=rows)
    assert _rows(env, inp) == [("a.parquet", 3), ("a.parquet", 4), ("a.parquet", 5)]
    assert FileFrontier(tmp_path).pending(inp.table) == []


def test_reading_a_parquet_input_imports_neither_pandas_nor_pyspark(tmp_path: Path) -> None:
    """A later run reads a few files and the inputs' schemas: neither needs pandas (which
    ``pyarrow.dataset`` imports) nor pyspark, each most of a second of the run's start."""
    import subprocess
    import sys

    _write(tmp_path, "a.parquet", [1, 2])
    code = (
        "import sys\n"
        "from spate.pipelines.inputs import FileInput\n"
        f"inp = FileInput('t', 'parquet', {str(tmp_path)!r})\n"
        "assert inp.read('a.parquet').num_rows == 2\n"
        "print(sorted(m for m in ('pandas', 'pyspark', 'pyarrow.dataset') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("fmt", "text", "options"),
    [
        ("csv", "007,1.50,True,x\n10,2.0,false,\n", {}),
        ("csv", "id,amt,code\n1,2.5,007\n2,,010\n", {"header": "true"}),
        ("csv", "id,amt,code\n1,2.5,007\n2,,010\n", {"header": "true", "inferSchema": "true"}),
        ("json", '{"b": 1, "a": "x"}\n{"a": "y", "c": 2.5}\n', {}),
    ],
)
def test_csv_and_json_files_are_read_as_spark_reads_them(
    tmp_path: Path, spark: SparkSession, fmt: str, text: str, options: dict[str, str]
) -> None:
    """Without inferSchema a CSV column holds the text as written ('007', '1.50', 'True'),
    not a number inferred and printed again ('7', '1.5', 'true')."""
    (tmp_path / f"a.{fmt}").write_text(text)
    got = FileInput("_in", fmt, str(tmp_path), options).read(f"a.{fmt}")
    want = spark.read.options(**options).format(fmt).load(str(tmp_path))
    assert got.column_names == want.columns
    assert normalized(got.to_pylist()) == normalized([r.asDict() for r in want.collect()])
