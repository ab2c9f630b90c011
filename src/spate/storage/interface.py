"""What storage offers the layers above it: the interface the compute controller depends on.

Implemented by the storage controller and by a test double in the compute controller's unit
tests; storage defines it, so compute depends on storage's interface and never the reverse.

The compute controller needs three things from storage, for *storage collections* (tables,
sources, materialized-view shards):

1. **Read holds** on the collections a dataflow imports (source imports) or a persist peek
   reads, so that storage does not compact away times a replica still reads
   (``acquire_read_holds``).
2. **Frontiers** (``since`` and ``upper``) of those collections: the scheduling gate waits for
   an input's upper to pass a dataflow's as_of, the warmup hold follows ``upper - 1`` of the
   inputs, a materialized view adopts its shard's upper, and a replayed ``CreateDataflow``
   carries its inputs' current uppers.
3. **Metadata**: the persist shard and schema of a source import, a persist-peek target or a
   materialized-view sink (``collection_metadata``).

Obligations of an implementation (``StorageCollections``):

* ``acquire_read_holds(ids)`` MUST be all-or-nothing: if any id is not a storage collection it
  raises a ``KeyError`` (any subclass; the message names the id) and acquires nothing.
  Otherwise it returns one :class:`~spate.frontier.ReadHold` per id, **at that collection's
  current since** (the earliest readable time, not its implied capability), already counted,
  so the hold is effective when the call returns.
* The holds' issuer callback MUST accept changes at any time, including while the compute
  controller is inside one of its own calls, and MUST NOT call back into the compute
  controller. Changes MUST be applied in the order they were sent (a ``clone`` followed by a
  ``release`` of the original never lets the since pass the clone). The since of a collection
  MUST NOT pass any outstanding hold. The compute controller downgrades holds only forward and
  releases each hold exactly once.
* ``collection_frontiers(id)`` returns the current ``since`` and ``upper``; ``upper`` MUST NOT
  regress between calls. It MUST keep answering for an id while any hold on it is outstanding,
  even if the collection was dropped meanwhile. Unknown ids raise a ``KeyError``.
* ``collection_metadata(id)`` returns the shard and relation description; unknown ids raise a
  ``KeyError``. The metadata of a collection never changes.
* All three are synchronous, cheap (called on hot paths: ``collection_frontiers`` once per
  dependency per maintenance pass) and MUST NOT block on I/O: an implementation serves them
  from its in-memory state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from spate.frontier.antichain import Frontier
from spate.frontier.read_hold import ReadHold
from spate.ids import GlobalId, ShardId
from spate.repr.desc import RelationDesc


@dataclass(frozen=True, slots=True)
class StorageCollectionMetadata:
    """Where a storage collection lives: its persist shard and its schema."""

    id: GlobalId
    shard: ShardId
    desc: RelationDesc


@dataclass(frozen=True, slots=True)
class StorageFrontiers:
    """A storage collection's read frontier (``since``) and write frontier (``upper``)."""

    since: Frontier
    upper: Frontier


class StorageCollections(Protocol):
    """What the compute controller requires of the storage controller (see module docs)."""

    def acquire_read_holds(self, ids: Sequence[GlobalId]) -> list[ReadHold]:
        """One hold per id at its current since; all-or-nothing; ``KeyError`` if unknown."""
        ...

    def collection_frontiers(self, id: GlobalId) -> StorageFrontiers:
        """The current since and upper of ``id``; ``KeyError`` if unknown."""
        ...

    def collection_metadata(self, id: GlobalId) -> StorageCollectionMetadata:
        """Shard and schema of ``id``; ``KeyError`` if unknown."""
        ...
