"""A sink into a directory of Parquet files: one file per closed interval, plus a manifest.

The directory holds ``part-<lower>-<upper>.parquet`` files (the data columns, ``_time`` and
``_diff`` of every update in ``[lower, upper)``) and ``_manifest.json``, which names the
committed files and the sink's frontier. **The manifest is the commit point**: a file is
written (temp, fsync, rename, directory fsync) before the manifest that names it, and files the
manifest does not name are leftovers of a crash and are deleted when the sink opens. So after
any crash the committed files hold every update of the collection at times before the frontier,
exactly once, and the collection at ``frontier - 1`` is the accumulation of the committed files.

Writes are idempotent: an interval that ends at or before the frontier is already committed and
is skipped; one that starts elsewhere than the frontier would leave a gap and is refused.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from spate.frontier.antichain import Antichain, Frontier
from spate.repr.desc import RelationDesc
from spate.storage.sinks.interval import SinkError, SinkFenced, check_interval

MANIFEST: Final = "_manifest.json"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _bound(f: Frontier) -> str:
    t = f.as_option()
    return "inf" if t is None else f"{t:020d}"


class ParquetDirSink:
    """Exactly-once writer of a collection's updates into ``directory``."""

    def __init__(self, directory: Path, desc: RelationDesc, *, sink: str) -> None:
        self._dir = Path(directory)
        self._desc = desc
        self._sink = sink
        self._dir.mkdir(parents=True, exist_ok=True)
        self._manifest = self._load()
        self._remove_uncommitted()

    def _load(self) -> dict[str, Any]:
        path = self._dir / MANIFEST
        if not path.exists():
            return {"version": 1, "sink": self._sink, "upper": [0], "files": []}
        manifest: dict[str, Any] = json.loads(path.read_text())
        if manifest.get("sink") != self._sink:
            raise SinkError(
                f"sink {self._sink}: directory {self._dir} belongs to sink {manifest.get('sink')}"
            )
        return manifest

    def _remove_uncommitted(self) -> None:
        committed = {f["name"] for f in self._manifest["files"]}
        for entry in os.scandir(self._dir):
            is_part = entry.name.startswith("part-") and entry.name.endswith(".parquet")
            is_tmp = entry.name.startswith(".") and entry.name.endswith(".tmp")
            if (is_part and entry.name not in committed) or is_tmp:
                os.unlink(entry.path)

    @property
    def upper(self) -> Frontier:
        """The sink's frontier: every update at a time before it is committed."""
        return Antichain(self._manifest["upper"])

    def committed_files(self) -> list[Path]:
        return [self._dir / f["name"] for f in self._manifest["files"]]

    def write(self, updates: pa.Table, *, lower: Frontier, upper: Frontier) -> bool:
        """Commit the updates of ``[lower, upper)``; ``False`` if they were already committed."""
        current = self.upper
        if upper.less_equal(current):
            return False
        if lower != current:
            if current.less_than(lower):
                raise SinkError(
                    f"sink {self._sink}: [{lower}, {upper}) would leave a gap after the "
                    f"sink's frontier {current}"
                )
            raise SinkFenced(
                f"sink {self._sink}: [{lower}, {upper}) overlaps the committed frontier {current}"
            )
        table = check_interval(self._sink, self._desc, updates, lower=lower, upper=upper)
        manifest = dict(self._manifest)
        files = list(manifest["files"])
        if table.num_rows:
            name = f"part-{_bound(lower)}-{_bound(upper)}.parquet"
            buf = io.BytesIO()
            pq.write_table(table, buf, coerce_timestamps="us")
            _write_atomic(self._dir / name, buf.getvalue())
            files.append(
                {"name": name, "lower": list(lower), "upper": list(upper), "rows": table.num_rows}
            )
        manifest["files"] = files
        manifest["upper"] = list(upper)
        _write_atomic(self._dir / MANIFEST, json.dumps(manifest, indent=1).encode())
        self._manifest = manifest
        return True

    def read_all(self) -> pa.Table:
        """Every committed update (for tests and tools)."""
        return _read_files(self._desc, self.committed_files())


@dataclass(frozen=True)
class SinkContents:
    """What a sink directory holds committed: its frontier and every update before it."""

    upper: Frontier
    updates: pa.Table


def read_committed(directory: Path, desc: RelationDesc, *, sink: str) -> SinkContents:
    """The committed contents of the sink in ``directory``, without changing the directory.

    Opening a :class:`ParquetDirSink` makes the caller the writer (it deletes what the manifest
    does not name, including a live writer's temp files); a reader of a sink that may be running
    uses this instead. The manifest is replaced atomically and never names a file that is later
    removed, so the files it names are all there to read.
    """
    path = Path(directory)
    manifest_path = path / MANIFEST
    if not manifest_path.exists():
        return SinkContents(Antichain.of(0), _read_files(desc, []))
    manifest: dict[str, Any] = json.loads(manifest_path.read_text())
    if manifest.get("sink") != sink:
        raise SinkError(f"sink {sink}: directory {path} belongs to sink {manifest.get('sink')}")
    files = [path / f["name"] for f in manifest["files"]]
    return SinkContents(Antichain(manifest["upper"]), _read_files(desc, files))


def _read_files(desc: RelationDesc, files: list[Path]) -> pa.Table:
    from spate.repr.arrow import updates_schema

    tables = [pq.read_table(p) for p in files]
    if not tables:
        return updates_schema(desc).empty_table()
    return pa.concat_tables(tables)
