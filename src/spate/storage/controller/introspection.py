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

APPEND_ONLY: Final = frozenset(
    {IntrospectionKind.SOURCE_STATUS_HISTORY, IntrospectionKind.SINK_STATUS_HISTORY}
)
"""Kinds written blindly (append-only); the others are differential."""
