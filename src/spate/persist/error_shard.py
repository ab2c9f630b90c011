"""The errors shard of a collection: its evaluation errors, durable beside its rows.

A materialized view's dataflow keeps an error collection (records with times and
multiplicities, :mod:`spate.errors`): its rows go to the view's shard ``s``, its error records
to the shard :func:`errors_shard` ``(s)``, with schema :data:`ERRORS_DESC` (one text column,
the record), written by the same sink with the same protocol. As Materialize keeps an error
stream per collection:

* the errors shard's upper is never behind the rows' (a writer appends ``[lower, upper)`` of
  the errors before the rows of the same interval), so a reader that sees the rows' upper pass
  ``t`` finds the errors at ``t`` complete;
* its since follows the rows' since (the storage controller downgrades both), so the error
  history is compacted with the view and a read at ``t >= since`` sees the errors at ``t``;
* the collection at ``t`` is *in error* exactly when the errors shard's contents at ``t`` are
  not empty; a reader of the collection (a read on any cluster, a dataflow importing it) fails
  or carries the errors on (an importer's error collection includes them).

The errors shard's id is derived from the rows' shard (no catalog entry): a shard nobody wrote
(``seqno == 0``) means the collection has no errors shard (a table, a source, a view written
before errors were durable).
"""

from __future__ import annotations

import uuid
from typing import Final

import pyarrow as pa

from spate.ids import ShardId
from spate.persist.client import PersistClient
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import TEXT

_NAMESPACE: Final = uuid.UUID("6f1d3c52-58a4-4f3e-9a7e-5d2b1a0c7e91")

ERROR_RECORD_COLUMN: Final = "error"
ERRORS_DESC: Final = RelationDesc.of((ERROR_RECORD_COLUMN, TEXT, False))
"""The schema of an errors shard: one error record (``spate.errors.error_record``) a row."""


def errors_shard(shard: ShardId) -> ShardId:
    """The errors shard of the collection whose rows are in ``shard`` (module docs)."""
    return ShardId(uuid.uuid5(_NAMESPACE, str(shard)))


def has_errors_shard(persist: PersistClient, shard: ShardId) -> bool:
    """Whether the collection in ``shard`` has an errors shard (someone wrote it)."""
    return persist.fetch_state(errors_shard(shard)).seqno > 0


def error_updates(
    records: pa.Array | pa.ChunkedArray,
    times: pa.Array | pa.ChunkedArray,
    diffs: pa.Array | pa.ChunkedArray,
) -> pa.Table:
    """Error records with their times and multiplicities in the errors shard's layout."""
    return pa.table(
        {ERROR_RECORD_COLUMN: records, TIME_COLUMN: times, DIFF_COLUMN: diffs},
        schema=pa.schema(
            [
                pa.field(ERROR_RECORD_COLUMN, pa.string(), nullable=False),
                pa.field(TIME_COLUMN, pa.int64(), nullable=False),
                pa.field(DIFF_COLUMN, pa.int64(), nullable=False),
            ]
        ),
    )


def errors_at(
    persist: PersistClient, shard: ShardId, timestamp: int, *, timeout: float = 30.0
) -> list[tuple[str, int]] | None:
    """The error records (with their counts, in a stable order) of the collection in ``shard``
    at ``timestamp``; ``None`` when its errors shard does not answer for ``timestamp`` (there
    is none, its upper is not past ``timestamp`` yet, or its since is beyond it)."""
    eshard = errors_shard(shard)
    state = persist.fetch_state(eshard)
    if state.seqno == 0 or state.tombstone:
        return None
    if state.upper.less_equal(timestamp) or not state.since.less_equal(timestamp):
        return None
    reader = persist.open_leased_reader(eshard, ERRORS_DESC)
    try:
        table = reader.snapshot(timestamp, timeout=timeout)
    finally:
        reader.expire()
    records = table.column(ERROR_RECORD_COLUMN).to_pylist()
    counts = table.column(DIFF_COLUMN).to_pylist()
    found: dict[str, int] = {}
    for r, n in zip(records, counts, strict=True):
        found[str(r)] = found.get(str(r), 0) + int(n)
    return sorted((r, n) for r, n in found.items() if n)
