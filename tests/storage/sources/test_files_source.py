"""The FILES source: new files once each, replay, changed files, bad data, Spark == pyarrow."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.protocol.storage_desc import FileFormat, FileSource
from spate.repr.arrow import data_schema
from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL, DATE, FLOAT64, INT64, TEXT, TIMESTAMP, numeric
from spate.storage.sources.files import FilesReader
from spate.storage.sources.source import SourceError

DESC = RelationDesc.of(
    ("id", INT64, False),
    ("name", TEXT),
    ("price", numeric(10, 2)),
    ("day", DATE),
    ("at", TIMESTAMP),
    ("ok", BOOL),
    ("ratio", FLOAT64),
)
ROWS = [
    (1, "plain", Decimal("1.50"), dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5), True, 0.5),
    (2, None, None, None, None, None, None),
    (3, 'with "quotes", commas', Decimal("-7.00"), dt.date(1999, 12, 31), None, False, -2.0),
]


def write(directory: Path, name: str, fmt: str, rows: list[tuple[object, ...]]) -> None:
    cols = list(zip(*rows, strict=True))
    table = pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(cols, data_schema(DESC), strict=True)],
        schema=data_schema(DESC),
    )
    tmp = directory / f".{name}.tmp"
    if fmt == "parquet":
        pq.write_table(table, tmp)
    elif fmt == "csv":
        lines = [",".join(DESC.names)]
        for r in rows:
            cells = []
            for v in r:
                if v is None:
                    cells.append("")
                elif isinstance(v, str):
                    cells.append('"' + v.replace('"', '""') + '"')
                elif isinstance(v, bool):
                    cells.append("true" if v else "false")
                elif isinstance(v, dt.datetime):
                    cells.append(v.isoformat(sep=" "))
                else:
                    cells.append(str(v))
            lines.append(",".join(cells))
        tmp.write_text("\n".join(lines) + "\n")
    else:
        with open(tmp, "w") as f:
            for r in rows:
                obj = {}
                for n, v in zip(DESC.names, r, strict=True):
                    if isinstance(v, (dt.date, dt.datetime)):
                        v = v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v.isoformat()
                    elif isinstance(v, Decimal):
                        v = float(v)
                    obj[n] = v
                f.write(json.dumps(obj) + "\n")
    tmp.rename(directory / name)  # appear atomically


def contents(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted((tuple(r[n] for n in DESC.names) for r in table.to_pylist()), key=lambda r: r[0])


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_each_file_once_then_replay(tmp_path: Path, fmt: str) -> None:
    source = FileSource(str(tmp_path), FileFormat(fmt), pattern="[a-z]")
    reader = FilesReader(source, DESC, output="files")
    p0 = reader.minimum()
    assert reader.poll(p0, now_millis=0) is None
    write(tmp_path, "a", fmt, ROWS[:2])
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "notes.txt").write_text("not matching the pattern")
    (tmp_path / ".partial").write_text("garbage")
    c1 = reader.poll(p0, now_millis=0)
    assert c1 is not None and c1.upper == frozenset({("a", (tmp_path / "a").stat().st_size)})
    assert contents(c1.updates["files"]) == ROWS[:2]
    assert reader.poll(c1.upper, now_millis=0) is None  # nothing new
    write(tmp_path, "b", fmt, ROWS[2:])
    c2 = reader.poll(c1.upper, now_millis=0)
    assert c2 is not None and contents(c2.updates["files"]) == ROWS[2:]
    assert c2.updates["files"].column("_diff").to_pylist() == [1]
    # Replay re-reads exactly the files between two points.
    assert contents(reader.replay(p0, c2.upper).updates["files"]) == ROWS
    assert contents(reader.replay(c1.upper, c2.upper).updates["files"]) == ROWS[2:]
    assert reader.point_from_rows(reader.progress_rows(c2.upper)) == c2.upper


def test_changed_or_removed_files_cannot_be_replayed(tmp_path: Path) -> None:
    reader = FilesReader(FileSource(str(tmp_path), FileFormat.PARQUET), DESC, output="files")
    write(tmp_path, "a", "parquet", ROWS)
    c1 = reader.poll(reader.minimum(), now_millis=0)
    assert c1 is not None
    write(tmp_path, "a", "parquet", ROWS[:1])
    with pytest.raises(SourceError, match="a changed after it was ingested"):
        reader.replay(reader.minimum(), c1.upper)
    (tmp_path / "a").unlink()
    with pytest.raises(SourceError, match="has since been removed"):
        reader.replay(reader.minimum(), c1.upper)


def test_bad_files_are_clear_errors(tmp_path: Path) -> None:
    reader = FilesReader(FileSource(str(tmp_path), FileFormat.CSV), DESC, output="files")
    (tmp_path / "bad").write_text("id,name,price,day,at,ok,ratio\nnot-a-number,x,1,,,,\n")
    with pytest.raises(SourceError, match=r"cannot read .*bad"):
        reader.poll(reader.minimum(), now_millis=0)
    (tmp_path / "bad").unlink()
    (tmp_path / "nulls").write_text("id,name,price,day,at,ok,ratio\n,x,1,,,,\n")
    with pytest.raises(SourceError, match="column 'id': expected non-null int64"):
        reader.poll(reader.minimum(), now_millis=0)
    with pytest.raises(SourceError, match="does not exist"):
        FilesReader(FileSource(str(tmp_path / "nope"), FileFormat.CSV), DESC).poll(
            frozenset(), now_millis=0
        )
    with pytest.raises(SourceError, match="format must be"):
        FilesReader(FileSource(str(tmp_path), "xml"), DESC)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_spark_and_arrow_read_the_same(tmp_path: Path, fmt: str, spark) -> None:
    write(tmp_path, "a", fmt, ROWS)
    write(tmp_path, "b", fmt, ROWS[:1])
    source = FileSource(str(tmp_path), FileFormat(fmt))
    by_arrow = FilesReader(source, DESC, output="files", spark=lambda: spark)
    by_spark = FilesReader(source, DESC, output="files", spark=lambda: spark, spark_min_bytes=0)
    a = by_arrow.poll(frozenset(), now_millis=0)
    s = by_spark.poll(frozenset(), now_millis=0)
    assert a is not None and s is not None
    assert by_arrow.arrow_reads == 1 and by_spark.spark_reads == 1
    assert a.updates["files"].schema == s.updates["files"].schema
    assert contents(a.updates["files"]) == contents(s.updates["files"])
