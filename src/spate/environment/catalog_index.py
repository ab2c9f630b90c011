"""The lookups of one catalog state: items by name and by id, definitions by id, and who reads
each id, each found without scanning the catalog.

An index belongs to one immutable catalog state and is never changed. The state a transition
derives gets an index derived from its predecessor's (:meth:`CatalogIndex.changed`: the dicts
copied, which is a memory copy, and only the items that changed added or removed), or, if a
transition does not say what changed, one built from scratch when first needed. Either way, for
a state with items ``I``: ``by_name[i.name] is i`` and ``by_id[i.id] is i`` for each ``i`` in
``I``; ``readers(x)`` is every ``i`` in ``I`` with ``x`` in ``reads(i)``, in the order of ``I``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar

from spate.ids import GlobalId


class _Named(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def id(self) -> GlobalId: ...


class _Keyed(Protocol):
    @property
    def id(self) -> GlobalId: ...


It = TypeVar("It", bound=_Named)
D = TypeVar("D", bound=_Keyed)


class CatalogIndex(Generic[It, D]):
    """See the module docs. ``reads(item)``: the ids ``item`` reads."""

    __slots__ = ("_by_id", "_by_name", "_definitions", "_next", "_order", "_readers", "_reads")

    def __init__(
        self,
        items: Sequence[It],
        definitions: Sequence[D],
        reads: Callable[[It], Iterable[GlobalId]],
    ) -> None:
        self._reads = reads
        self._by_name = {i.name: i for i in items}
        self._by_id = {i.id: i for i in items}
        self._definitions = {d.id: d for d in definitions}
        self._order = {i.id: n for n, i in enumerate(items)}
        self._next = len(items)
        self._readers: dict[GlobalId, dict[GlobalId, None]] = {}
        for i in items:
            for x in reads(i):
                self._readers.setdefault(x, {})[i.id] = None

    def item_named(self, name: str) -> It | None:
        return self._by_name.get(name)

    def item(self, id: GlobalId) -> It | None:
        return self._by_id.get(id)

    def definition(self, id: GlobalId) -> D | None:
        return self._definitions.get(id)

    def readers(self, id: GlobalId) -> list[It]:
        """The items that read ``id``, in catalog order (each reader set is kept in it)."""
        by_id = self._by_id
        return [by_id[r] for r in self._readers.get(id, ())]

    def changed(
        self,
        *,
        added: Sequence[It] = (),
        removed: Sequence[It] = (),
        definitions_added: Sequence[D] = (),
        definitions_removed: Sequence[GlobalId] = (),
    ) -> CatalogIndex[It, D]:
        """The index of the state with ``removed`` removed and ``added`` appended (a removed
        item added again with the same id keeps its place), likewise the definitions."""
        new = object.__new__(CatalogIndex)
        new._reads = self._reads
        new._by_name, new._by_id = dict(self._by_name), dict(self._by_id)
        new._definitions, new._order = dict(self._definitions), dict(self._order)
        new._readers, new._next = dict(self._readers), self._next
        places: dict[GlobalId, int] = {}
        for i in removed:
            del new._by_name[i.name]
            del new._by_id[i.id]
            places[i.id] = new._order.pop(i.id)
            for x in self._reads(i):
                left = dict(new._readers[x])  # copied: the old index shares it
                del left[i.id]
                if left:
                    new._readers[x] = left
                else:
                    del new._readers[x]
        for i in added:
            new._by_name[i.name] = i
            new._by_id[i.id] = i
            if i.id in places:  # back in its place: not last among the readers
                new._order[i.id] = places[i.id]
                for x in self._reads(i):
                    readers = [*new._readers.get(x, {}), i.id]
                    readers.sort(key=new._order.__getitem__)
                    new._readers[x] = dict.fromkeys(readers)
            else:
                new._order[i.id] = new._next
                new._next += 1
                for x in self._reads(i):
                    new._readers[x] = {**new._readers.get(x, {}), i.id: None}
        for gid in definitions_removed:
            new._definitions.pop(gid, None)
        for d in definitions_added:
            new._definitions[d.id] = d
        return new
