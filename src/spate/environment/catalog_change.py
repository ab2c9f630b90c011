"""One catalog change as a value: what differs between two catalog states.

A DDL statement changes a few items of a catalog that may hold thousands. The durable catalog
(:mod:`spate.environment.catalog_store`) stores such a change rather than the whole state, so
that the work of a change — encoding, checking that it decodes, writing it — depends on what
changed, not on the catalog's size.

For states ``old`` and ``new`` where ``new`` was derived from ``old`` by the catalog's
transitions, ``apply(old, diff(old, new)) == new``. Items and definitions are matched by object
identity (a transition keeps the values it does not change): those added are carried and go
last, those replaced are carried with their position (and keep it), those removed are named by
position and id (positions are in the catalog before the change, so applying one is a few list
operations, and a change that does not fit the state it is applied to is refused). The id
counters are carried whole, and the small parts (clusters, comments, secrets, connections) are
carried whole when they changed. The store checks the equality before it commits a change, and
commits the whole state when it does not hold, so a reopened catalog is always identical to the
one committed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Generic, TypeVar

from spate.environment.catalog import CatalogState, ClusterItem, Comment, StoredItem
from spate.environment.definitions import ConnectionEntry, Definition, SecretEntry
from spate.errors import ProtocolError
from spate.ids import GlobalId
from spate.wire import wire

X = TypeVar("X")


@wire("catalog.change")
@dataclasses.dataclass(frozen=True, slots=True)
class CatalogChange:
    """The catalog after this change is the one before it with, for its items: those at
    positions ``removed_at`` (ids ``removed``) removed, those at ``replaced_at`` replaced by
    ``replaced`` (positions in the catalog before the change), and ``added`` appended; likewise
    for its definitions; the counters set; and each of ``clusters``, ``comments``, ``secrets``
    and ``connections`` that is not ``None`` replaced whole. ``epoch``: the environment that
    committed it."""

    epoch: int
    next_id: int
    next_instance: int
    next_replica: int
    added: tuple[StoredItem, ...] = ()
    replaced_at: tuple[int, ...] = ()
    replaced: tuple[StoredItem, ...] = ()
    removed_at: tuple[int, ...] = ()
    removed: tuple[GlobalId, ...] = ()
    definitions_added: tuple[Definition, ...] = ()
    definitions_replaced_at: tuple[int, ...] = ()
    definitions_replaced: tuple[Definition, ...] = ()
    definitions_removed_at: tuple[int, ...] = ()
    definitions_removed: tuple[GlobalId, ...] = ()
    clusters: tuple[ClusterItem, ...] | None = None
    comments: tuple[Comment, ...] | None = None
    secrets: tuple[SecretEntry, ...] | None = None
    connections: tuple[ConnectionEntry, ...] | None = None

    @property
    def size(self) -> int:
        """How many items and definitions it carries (what its cost grows with)."""
        return (
            len(self.added)
            + len(self.replaced)
            + len(self.removed)
            + len(self.definitions_added)
            + len(self.definitions_replaced)
            + len(self.definitions_removed)
        )


def _by_id(value: StoredItem | Definition) -> GlobalId:
    return value.id


@dataclasses.dataclass(frozen=True, slots=True)
class _Patch(Generic[X]):
    added: tuple[X, ...] = ()
    replaced_at: tuple[int, ...] = ()
    replaced: tuple[X, ...] = ()
    removed_at: tuple[int, ...] = ()
    removed: tuple[GlobalId, ...] = ()


def _patch(old: tuple[X, ...], new: tuple[X, ...], key: Callable[[X], GlobalId]) -> _Patch[X]:
    """How ``new`` differs from ``old``, by object identity (unchanged values are the same
    objects) and position; ``key`` matches a replaced value with the one it replaces."""
    if old is new:
        return _Patch()
    if len(new) >= len(old) and new[: len(old)] == old:
        return _Patch(added=new[len(old) :])  # the common case: appended only
    kept = set(map(id, new))
    gone = [i for i, x in enumerate(old) if id(x) not in kept]
    before = set(map(id, old))
    fresh = [x for x in new if id(x) not in before]
    position = {key(old[i]): i for i in gone}
    replaced = [x for x in fresh if key(x) in position]
    removed_at = sorted(set(gone) - {position[key(x)] for x in replaced})
    return _Patch(
        added=tuple(x for x in fresh if key(x) not in position),
        replaced_at=tuple(position[key(x)] for x in replaced),
        replaced=tuple(replaced),
        removed_at=tuple(removed_at),
        removed=tuple(key(old[i]) for i in removed_at),
    )


def _patched(old: tuple[X, ...], patch: _Patch[X], key: Callable[[X], GlobalId]) -> tuple[X, ...]:
    if not (patch.replaced or patch.removed_at):
        return old + patch.added if patch.added else old
    out = list(old)
    for at, value in zip(patch.replaced_at, patch.replaced, strict=True):
        if not 0 <= at < len(out) or key(out[at]) != key(value):
            raise ProtocolError(f"catalog change replaces {key(value)} at position {at}")
    for at, value in zip(patch.replaced_at, patch.replaced, strict=True):
        out[at] = value
    for at, gid in sorted(zip(patch.removed_at, patch.removed, strict=True), reverse=True):
        if not 0 <= at < len(out) or key(out[at]) != gid:
            raise ProtocolError(f"catalog change removes {gid} at position {at}")
        del out[at]
    out.extend(patch.added)
    return tuple(out)


def _whole(old: tuple[X, ...], new: tuple[X, ...]) -> tuple[X, ...] | None:
    return None if old is new or old == new else new


def diff(old: CatalogState, new: CatalogState, *, epoch: int) -> CatalogChange:
    """The change from ``old`` to ``new`` (see the module docs)."""
    items = _patch(old.items, new.items, _by_id)
    definitions = _patch(old.definitions, new.definitions, _by_id)
    return CatalogChange(
        epoch=epoch,
        next_id=new.next_id,
        next_instance=new.next_instance,
        next_replica=new.next_replica,
        added=items.added,
        replaced_at=items.replaced_at,
        replaced=items.replaced,
        removed_at=items.removed_at,
        removed=items.removed,
        definitions_added=definitions.added,
        definitions_replaced_at=definitions.replaced_at,
        definitions_replaced=definitions.replaced,
        definitions_removed_at=definitions.removed_at,
        definitions_removed=definitions.removed,
        clusters=_whole(old.clusters, new.clusters),
        comments=_whole(old.comments, new.comments),
        secrets=_whole(old.secrets, new.secrets),
        connections=_whole(old.connections, new.connections),
    )


def apply(state: CatalogState, change: CatalogChange) -> CatalogState:
    """``state`` with ``change`` made; ``ProtocolError`` if it does not fit ``state``."""
    items = _Patch(
        change.added, change.replaced_at, change.replaced, change.removed_at, change.removed
    )
    definitions = _Patch(
        change.definitions_added,
        change.definitions_replaced_at,
        change.definitions_replaced,
        change.definitions_removed_at,
        change.definitions_removed,
    )
    return dataclasses.replace(
        state,
        items=_patched(state.items, items, _by_id),
        definitions=_patched(state.definitions, definitions, _by_id),
        next_id=change.next_id,
        next_instance=change.next_instance,
        next_replica=change.next_replica,
        clusters=state.clusters if change.clusters is None else change.clusters,
        comments=state.comments if change.comments is None else change.comments,
        secrets=state.secrets if change.secrets is None else change.secrets,
        connections=state.connections if change.connections is None else change.connections,
    )
