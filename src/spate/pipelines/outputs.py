"""Each dataset written where Spark users read it: Parquet under the pipeline's storage.

``<storage>/tables/<dataset>/part-00000.parquet`` holds the dataset's rows as of one committed
time, and ``_spate_committed`` beside it that time. The file is written aside and renamed into
place, so a reader sees one committed time or the next, never a mix; a time already written is
not written again (exactly once per committed time). Spark reads it with
``spark.read.parquet(path)``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["COMMITTED_FILE", "write_output"]

COMMITTED_FILE: Final = "_spate_committed"
_PART: Final = "part-00000.parquet"


def output_dir(storage: Path, dataset: str) -> Path:
    return storage / "tables" / dataset


def write_output(storage: Path, dataset: str, table: pa.Table, *, timestamp: int) -> bool:
    """Write ``table`` (``dataset`` at ``timestamp``); False when that time is already there."""
    d = output_dir(storage, dataset)
    d.mkdir(parents=True, exist_ok=True)
    marker = d / COMMITTED_FILE
    if marker.exists() and marker.read_text().strip() == str(timestamp):
        return False
    tmp = d / f".{_PART}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, d / _PART)
    tmp_marker = d / f".{COMMITTED_FILE}.tmp"
    tmp_marker.write_text(f"{timestamp}\n")
    os.replace(tmp_marker, marker)
    return True
