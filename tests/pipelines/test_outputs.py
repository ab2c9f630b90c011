"""A dataset's Parquet output: written once per committed time, replaced whole by a later
time (a reader sees one time or the next), nothing left aside. (No JVM: Spark reading it is
checked in test_incremental_run.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spate.pipelines.outputs import COMMITTED_FILE, output_dir, write_output


def test_written_once_per_committed_time(tmp_path: Path) -> None:
    d = output_dir(tmp_path, "gold")
    assert write_output(tmp_path, "gold", pa.table({"k": [1, 2]}), timestamp=10)
    part = d / "part-00000.parquet"
    stamp = part.stat().st_mtime_ns
    # the same time again (a run that found nothing new): not written again
    assert not write_output(tmp_path, "gold", pa.table({"k": [9]}), timestamp=10)
    assert part.stat().st_mtime_ns == stamp
    assert pq.read_table(d).column("k").to_pylist() == [1, 2]
    assert write_output(tmp_path, "gold", pa.table({"k": [3]}), timestamp=11)
    assert pq.read_table(d).column("k").to_pylist() == [3]
    assert (d / COMMITTED_FILE).read_text().strip() == "11"
    assert sorted(p.name for p in d.iterdir()) == [COMMITTED_FILE, "part-00000.parquet"]
