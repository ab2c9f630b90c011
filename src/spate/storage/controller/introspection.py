"""The schemas of the storage-managed (introspection) collections."""

from __future__ import annotations

from typing import Final

from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL, INT64, JSONB, TEXT, TIMESTAMP
from spate.storage.controller.types import IntrospectionKind

_STATUS: Final = RelationDesc.of(
    ("occurred_at", TIMESTAMP, False),
    ("object_id", TEXT, False),
    ("status", TEXT, False),
    ("error", TEXT),
    ("details", JSONB),
    ("replica_id", TEXT),
)

INTROSPECTION_DESCS: Final[dict[IntrospectionKind, RelationDesc]] = {
    IntrospectionKind.SOURCE_STATUS_HISTORY: _STATUS,
    IntrospectionKind.SINK_STATUS_HISTORY: _STATUS,
    IntrospectionKind.SOURCE_STATISTICS: RelationDesc.of(
        ("id", TEXT, False),
        ("replica_id", TEXT),
        ("worker", INT64, False),
        ("messages_received", INT64, False),
        ("bytes_received", INT64, False),
        ("updates_staged", INT64, False),
        ("updates_committed", INT64, False),
        ("snapshot_committed", BOOL, False),
        ("offset_known", INT64),
        ("offset_committed", INT64),
    ),
    IntrospectionKind.SINK_STATISTICS: RelationDesc.of(
        ("id", TEXT, False),
        ("replica_id", TEXT),
        ("worker", INT64, False),
        ("messages_staged", INT64, False),
        ("messages_committed", INT64, False),
        ("bytes_staged", INT64, False),
        ("bytes_committed", INT64, False),
    ),
    IntrospectionKind.SHARD_MAPPING: RelationDesc.of(
        ("object_id", TEXT, False), ("shard_id", TEXT, False)
    ),
    IntrospectionKind.FRONTIERS: RelationDesc.of(
        ("object_id", TEXT, False), ("read_frontier", INT64), ("write_frontier", INT64)
    ),
}

_K = IntrospectionKind
INTROSPECTION_DESCS.update(
    {
        _K.OBJECTS: RelationDesc.of(
            ("id", TEXT, False), ("name", TEXT, False), ("type", TEXT, False), ("cluster", TEXT)
        ),
        _K.COLUMNS: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("position", INT64, False),
            ("type", TEXT, False),
            ("nullable", BOOL, False),
        ),
        _K.CLUSTERS: RelationDesc.of(
            ("id", TEXT, False), ("name", TEXT, False), ("replicas", INT64, False)
        ),
        _K.REPLICAS: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("cluster", TEXT, False),
            ("process", TEXT, False),
            ("status", TEXT, False),
            ("restarts", INT64, False),
            ("failures", INT64, False),
            ("hydrated", INT64, False),
            ("collections", INT64, False),
            ("last_error", TEXT),
        ),
        _K.COLLECTION_FRONTIERS: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("type", TEXT, False),
            ("cluster", TEXT),
            ("since", INT64),
            ("upper", INT64),
            ("lag_ms", INT64),
        ),
        _K.HYDRATION: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("cluster", TEXT, False),
            ("replica", TEXT, False),
            ("replica_id", TEXT, False),
            ("hydrated", BOOL, False),
        ),
        _K.DATAFLOW_STATISTICS: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("cluster", TEXT, False),
            ("replica", TEXT, False),
            ("steps", INT64, False),
            ("spark_jobs", INT64),
            ("step_time_ms", INT64),
            ("rows_in", INT64),
            ("rows_out", INT64),
        ),
        _K.SOURCE_SUMMARY: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("status", TEXT),
            ("rows", INT64, False),
            ("bytes", INT64, False),
            ("errors", INT64, False),
            ("last_error", TEXT),
            ("committed_frontier", INT64),
        ),
        _K.SINK_SUMMARY: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("status", TEXT),
            ("rows", INT64, False),
            ("bytes", INT64, False),
            ("errors", INT64, False),
            ("last_error", TEXT),
            ("committed_frontier", INT64),
        ),
        _K.PEEKS: RelationDesc.of(
            ("id", TEXT, False),
            ("cluster", TEXT, False),
            ("target", TEXT, False),
            ("timestamp", INT64, False),
            ("replica", TEXT),
            ("requested_at", INT64, False),
        ),
        _K.SUBSCRIBES: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("cluster", TEXT, False),
            ("upper", INT64),
        ),
        _K.ERRORS: RelationDesc.of(
            ("id", TEXT, False),
            ("name", TEXT, False),
            ("cluster", TEXT, False),
            ("replica", TEXT, False),
            ("message", TEXT, False),
        ),
        _K.PIPELINE_EXPECTATIONS: RelationDesc.of(
            ("pipeline", TEXT, False),
            ("dataset", TEXT, False),
            ("expectation", TEXT, False),
            ("action", TEXT, False),
            ("passed", INT64, False),
            ("failed", INT64, False),
        ),
    }
)

APPEND_ONLY: Final = frozenset(
    {IntrospectionKind.SOURCE_STATUS_HISTORY, IntrospectionKind.SINK_STATUS_HISTORY}
)
"""Kinds written blindly (append-only); the others are differential."""
