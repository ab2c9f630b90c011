"""A stash: durable, write-once objects a source keeps outside persist until they are consumed.

A PostgreSQL snapshot cannot be read twice (the exported snapshot dies with its transaction),
yet an ingestion that crashes after binding the snapshot to a time but before writing it must
write exactly that snapshot on restart. So the snapshot is stashed durably *before* its
binding is minted and read back from the stash on replay.

Keys are ``/``-separated relative paths. ``put`` is atomic (readers see all of an object or
none) and durable when it returns. Replicas keep their stash in persist's Blob store
(:class:`BlobStash`; over a ``FileBlob`` for a local directory).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from spate.storage.sources.source import SourceError

if TYPE_CHECKING:
    from spate.persist.location import Blob


class Stash(Protocol):
    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes | None: ...

    def delete_prefix(self, prefix: str) -> None: ...


def _check_key(key: str) -> None:
    parts = key.split("/")
    if not key or any(p in ("", ".", "..") for p in parts) or key.startswith("/"):
        raise SourceError(f"bad stash key {key!r}")


class MemStash:
    """A stash in memory (tests)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put(self, key: str, data: bytes) -> None:
        _check_key(key)
        self.objects[key] = bytes(data)

    def get(self, key: str) -> bytes | None:
        return self.objects.get(key)

    def delete_prefix(self, prefix: str) -> None:
        p = prefix.rstrip("/")
        for k in [k for k in self.objects if k == p or k.startswith(p + "/")]:
            del self.objects[k]


class BlobStash:
    """A stash in persist's Blob store, under ``stash/`` (beside, never inside, shard data).

    Shared by every replica of a deployment, so a source moved to another replica finds its
    stash. Blob ``set`` is atomic and write-once per key; a stash key is written once.
    """

    PREFIX: Final = "stash"

    def __init__(self, blob: Blob) -> None:
        self._blob = blob

    def _key(self, key: str) -> str:
        _check_key(key)
        return f"{self.PREFIX}/{key}"

    def put(self, key: str, data: bytes) -> None:
        self._blob.set(self._key(key), data)

    def get(self, key: str) -> bytes | None:
        return self._blob.get(self._key(key))

    def delete_prefix(self, prefix: str) -> None:
        full = self._key(prefix.rstrip("/"))
        for key, _ in list(self._blob.list_keys(full)):
            if key == full or key.startswith(full + "/"):
                self._blob.delete(key)


def put_snapshot(
    stash: Stash, prefix: str, tables: Sequence[tuple[str, pa.Table]], position: dict[str, Any]
) -> None:
    """Stash a source's snapshot under ``prefix``: each table as Parquet, then the manifest
    (the tables' names in order and ``position``, where the snapshot was taken), written last:
    a snapshot is stashed once its manifest is."""
    for i, (_, table) in enumerate(tables):
        sink = io.BytesIO()
        pq.write_table(table, sink)
        stash.put(f"{prefix}/{i}.parquet", sink.getvalue())
    manifest = {**position, "tables": [name for name, _ in tables]}
    stash.put(f"{prefix}/manifest.json", json.dumps(manifest).encode())


def get_snapshot(
    stash: Stash, prefix: str, what: str
) -> tuple[dict[str, Any], dict[str, pa.Table]] | None:
    """The manifest and the non-empty tables of the snapshot stashed under ``prefix``;
    ``None`` if none is (no manifest). A table missing is a :class:`SourceError` naming
    ``what`` (the source)."""
    raw = stash.get(f"{prefix}/manifest.json")
    if raw is None:
        return None
    manifest: dict[str, Any] = json.loads(raw)
    out = {}
    for i, name in enumerate(manifest["tables"]):
        data = stash.get(f"{prefix}/{i}.parquet")
        if data is None:
            raise SourceError(f"{what}: the stashed snapshot of {name} is missing")
        table = pq.read_table(io.BytesIO(data))
        if table.num_rows:
            out[str(name)] = table
    return manifest, out
