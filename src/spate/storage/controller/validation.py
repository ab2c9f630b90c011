"""Validating ``create_collections`` before anything is written.

Pure: given what exists, decide which collections of a call are new, or raise the first
problem: an id named twice or reused with another description (``CollectionIdReused``), an
ingestion on a missing instance (``IngestionInstanceMissing``), an ingestion whose own
collection does not have its source's progress schema, an export that its ingestion does not
list (or the reverse), a load-generator export whose schema is not the generator's, a
storage-managed collection with the wrong schema (``InvalidUsage``).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from typing import TypeAlias

from spate.ids import GlobalId, InstanceId
from spate.protocol.storage_desc import LoadGeneratorSource
from spate.storage.controller.collections import CollectionState
from spate.storage.controller.errors import (
    CollectionIdReused,
    IdentifierMissing,
    IngestionInstanceMissing,
    InvalidUsage,
)
from spate.storage.controller.introspection import INTROSPECTION_DESCS
from spate.storage.controller.types import (
    CollectionDescription,
    IngestionExport,
    IngestionSource,
    IntrospectionSource,
    OtherSource,
    TableSource,
)
from spate.storage.sources.open import load_generator, progress_desc
from spate.storage.sources.source import SourceError

Lookup: TypeAlias = Callable[[GlobalId], CollectionDescription | None]


def validate_collections(
    collections: Sequence[tuple[GlobalId, CollectionDescription]],
    *,
    existing: Mapping[GlobalId, CollectionState],
    exports: Container[GlobalId],
    instances: Container[InstanceId],
) -> list[tuple[GlobalId, CollectionDescription]]:
    """The new collections of a create call, after validating all of them (module docs)."""
    batch: dict[GlobalId, CollectionDescription] = {}
    for id, description in collections:
        if not isinstance(description, CollectionDescription):
            raise InvalidUsage(f"{id}: not a CollectionDescription: {description!r}")
        if id in batch:
            raise CollectionIdReused(id, "named twice in one call")
        if id in exports:
            raise CollectionIdReused(id, "an export has this id")
        batch[id] = description
    new: list[tuple[GlobalId, CollectionDescription]] = []
    for id, description in batch.items():
        current = existing.get(id)
        if current is not None:
            if current.dropped or current.description != description:
                raise CollectionIdReused(id)
            continue
        new.append((id, description))

    def known(cid: GlobalId) -> CollectionDescription | None:
        if cid in batch:
            return batch[cid]
        state = existing.get(cid)
        return None if state is None or state.dropped else state.description

    for id, description in new:
        source = description.data_source
        if isinstance(source, IngestionSource):
            _validate_ingestion(id, description, source, known, instances)
        elif isinstance(source, IngestionExport):
            parent = known(source.ingestion)
            if parent is None or not isinstance(parent.data_source, IngestionSource):
                raise IdentifierMissing(source.ingestion, "ingestion")
            if parent.data_source.exports.get(id) != source.reference:
                raise InvalidUsage(
                    f"{id}: ingestion {source.ingestion} does not export {source.reference!r} to it"
                )
        elif isinstance(source, IntrospectionSource):
            want = INTROSPECTION_DESCS[source.kind]
            if description.desc != want:
                raise InvalidUsage(
                    f"{id}: a {source.kind.value} collection has schema {want}, "
                    f"not {description.desc}"
                )
        elif not isinstance(source, (TableSource, OtherSource)):
            raise InvalidUsage(f"{id}: unknown data source {source!r}")
    return new


def _validate_ingestion(
    id: GlobalId,
    description: CollectionDescription,
    source: IngestionSource,
    known: Lookup,
    instances: Container[InstanceId],
) -> None:
    if source.instance not in instances:
        raise IngestionInstanceMissing(source.instance, id)
    try:
        want = progress_desc(source.connection)
    except SourceError as e:
        raise InvalidUsage(f"{id}: {e}") from None
    if description.desc != want:
        raise InvalidUsage(
            f"{id}: an ingestion's own collection records its progress with schema {want}, "
            f"not {description.desc}"
        )
    if not source.exports:
        raise InvalidUsage(f"ingestion {id} has no exports")
    outputs = None
    if isinstance(source.connection, LoadGeneratorSource):
        outputs = load_generator(source.connection).outputs
    for eid, reference in source.exports.items():
        export = known(eid)
        if export is None or not isinstance(export.data_source, IngestionExport):
            raise IdentifierMissing(eid, f"export of ingestion {id}")
        if export.data_source.ingestion != id or export.data_source.reference != reference:
            raise InvalidUsage(f"{eid} is not export {reference!r} of ingestion {id}")
        if outputs is None:
            continue
        if reference not in outputs:
            raise InvalidUsage(
                f"{eid}: the generator has no output {reference!r}; outputs: {', '.join(outputs)}"
            )
        if outputs[reference] != export.desc:
            raise InvalidUsage(
                f"{eid}: output {reference!r} has schema {outputs[reference]}, not {export.desc}"
            )
