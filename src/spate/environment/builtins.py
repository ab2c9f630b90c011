"""The relations of the ``spate_catalog`` schema: spate describing itself in SQL.

Each is a storage-managed collection (a persist shard with a since and an upper, like a
table) that the storage controller's collection manager writes: every maintenance interval
(about a second) the environment states the desired contents from what the catalog, the
compute and storage controllers and the orchestrator know (:mod:`.introspection`), and the
manager appends the difference — old rows retracted, new rows added — at its write time. So
they are read like any collection: ``env.select("spate_catalog.replicas")``, AS OF a recent
time, in joins, in SUBSCRIBE, over pgwire. ``docs/introspection.md`` describes every column.

They are not in the durable catalog: :class:`~.catalog.CatalogState` resolves their names and
ids from :data:`BUILTINS`, and they cannot be dropped or written by users. Their ids are
system ids (``s1``…) that never change, so their shards survive restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from spate.ids import GlobalId
from spate.repr.desc import RelationDesc
from spate.storage.controller.introspection import INTROSPECTION_DESCS
from spate.storage.controller.types import IntrospectionKind
from spate.wire import wire

SCHEMA: Final = "spate_catalog"
RETAIN_HISTORY_MS: Final = 30_000
"""How far back the relations can be read AS OF."""


@wire("catalog.introspection")
@dataclass(frozen=True, slots=True)
class IntrospectionItem:
    """A relation of the ``spate_catalog`` schema (never stored in the durable catalog)."""

    name: str
    id: GlobalId
    kind: IntrospectionKind
    desc: RelationDesc
    retain_history_ms: int = RETAIN_HISTORY_MS


_K = IntrospectionKind
_RELATIONS: Final[tuple[tuple[str, IntrospectionKind], ...]] = (
    ("objects", _K.OBJECTS),
    ("columns", _K.COLUMNS),
    ("clusters", _K.CLUSTERS),
    ("replicas", _K.REPLICAS),
    ("frontiers", _K.COLLECTION_FRONTIERS),
    ("hydration", _K.HYDRATION),
    ("dataflow_statistics", _K.DATAFLOW_STATISTICS),
    ("source_statistics", _K.SOURCE_SUMMARY),
    ("sink_statistics", _K.SINK_SUMMARY),
    ("peeks", _K.PEEKS),
    ("subscribes", _K.SUBSCRIBES),
    ("source_status_history", _K.SOURCE_STATUS_HISTORY),
    ("sink_status_history", _K.SINK_STATUS_HISTORY),
    ("errors", _K.ERRORS),  # appended: the ids above stay what they were
    ("pipeline_expectations", _K.PIPELINE_EXPECTATIONS),
)

BUILTINS: Final[tuple[IntrospectionItem, ...]] = tuple(
    IntrospectionItem(f"{SCHEMA}.{name}", GlobalId.system(n), kind, INTROSPECTION_DESCS[kind])
    for n, (name, kind) in enumerate(_RELATIONS, start=1)
)
_BY_NAME: Final = {b.name: b for b in BUILTINS}
_BY_ID: Final = {b.id: b for b in BUILTINS}


def builtin(name: str) -> IntrospectionItem | None:
    """The relation called ``name`` (``spate_catalog.<relation>``), if there is one."""
    return _BY_NAME.get(name)


def builtin_by_id(id: GlobalId) -> IntrospectionItem | None:
    return _BY_ID.get(id)


def builtin_of(kind: IntrospectionKind) -> IntrospectionItem:
    return next(b for b in BUILTINS if b.kind is kind)
