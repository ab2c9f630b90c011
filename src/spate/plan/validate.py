"""Checks that a ``DataflowDescription`` fits together, before anything is built.

:func:`validate_dataflow` raises :class:`~spate.plan.errors.InvalidDataflow` naming the ids:

* import ids are unique; no object is both imported and built, or built twice;
* ``objects_to_build`` is in topological order: every ``Get`` in a plan reads an imported
  collection (a source import's id or an index import's ``on_id``) or an object built earlier;
* every ``Get`` agrees with what it reads: same column types, and it may call a column
  nullable but not call a nullable column non-null (names are not compared: the semantics is
  positional);
* export ids are unique and differ from every import id;
* index exports and sink exports read an imported or built collection, with a matching desc;
  index keys (of imports and exports) lie within the arity.

Relational plans themselves are validated when they are constructed (types, columns); this
module checks only how the parts of the description refer to each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.plan.errors import InvalidDataflow
from spate.plan.relation import Get

if TYPE_CHECKING:
    from spate.ids import GlobalId
    from spate.plan.dataflow import DataflowDescription
    from spate.repr.desc import RelationDesc


def fits(actual: RelationDesc, claimed: RelationDesc) -> str | None:
    """``None`` if a reader may see ``actual`` as ``claimed``; else what differs."""
    if actual.arity != claimed.arity:
        return f"{claimed.arity} columns ({', '.join(claimed.names)}) but it has {actual.arity}"
    for i, (a, c) in enumerate(zip(actual.columns, claimed.columns, strict=True)):
        if a.type != c.type:
            return f"column {i} ({c.name!r}) as {c.type} but it is {a.type}"
        if a.nullable and not c.nullable:
            return f"column {i} ({c.name!r}) as not null but it is nullable"
    return None


def _check_key(key: tuple[int, ...], desc: RelationDesc, what: str) -> None:
    for k in key:
        if not 0 <= k < desc.arity:
            raise InvalidDataflow(
                f"{what}: key column {k} is outside the {desc.arity} columns"
                f" ({', '.join(desc.names)})"
            )


def validate_dataflow(dataflow: DataflowDescription) -> None:
    """Raise ``InvalidDataflow`` unless the description's parts fit (see the module doc)."""
    available: dict[GlobalId, tuple[RelationDesc, str]] = {}
    import_ids: set[GlobalId] = set()
    for s in dataflow.source_imports:
        if s.id in import_ids:
            raise InvalidDataflow(f"source import {s.id} is imported twice")
        import_ids.add(s.id)
        available[s.id] = (s.desc, f"source import {s.id}")
    for ix in dataflow.index_imports:
        if ix.id in import_ids:
            raise InvalidDataflow(f"index import {ix.id} is imported twice")
        import_ids.add(ix.id)
        _check_key(ix.index.key, ix.desc, f"index import {ix.id} on {ix.index.on_id}")
        on = ix.index.on_id
        if on in available:
            problem = fits(available[on][0], ix.desc)
            if problem is not None:
                raise InvalidDataflow(
                    f"index import {ix.id} describes {on} with {problem} in {available[on][1]}"
                )
        else:
            available[on] = (ix.desc, f"index import {ix.id}")

    built: set[GlobalId] = set()
    later = {b.id for b in dataflow.objects_to_build}
    for b in dataflow.objects_to_build:
        if b.id in built:
            raise InvalidDataflow(f"object {b.id} is built twice")
        if b.id in available:
            raise InvalidDataflow(f"object {b.id} is both imported and built")
        for node in b.plan.walk():
            if not isinstance(node, Get):
                continue
            if node.id not in available:
                if node.id in later:
                    raise InvalidDataflow(
                        f"objects_to_build is not in topological order: {b.id} reads "
                        f"{node.id}, which is built after it"
                    )
                raise InvalidDataflow(
                    f"object {b.id} reads {node.id}, which is neither imported nor built"
                )
            desc, where = available[node.id]
            problem = fits(desc, node.desc)
            if problem is not None:
                raise InvalidDataflow(f"object {b.id} reads {node.id} with {problem} (in {where})")
        built.add(b.id)
        available[b.id] = (b.plan.desc, f"object {b.id}")

    exports: set[GlobalId] = set()
    for e in dataflow.index_exports:
        _check_export_id(e.id, exports, import_ids)
        on = e.index.on_id
        if on not in available:
            raise InvalidDataflow(
                f"index export {e.id} is on {on}, which is neither imported nor built"
            )
        problem = fits(available[on][0], e.desc)
        if problem is not None:
            raise InvalidDataflow(f"index export {e.id} describes {on} with {problem}")
        _check_key(e.index.key, e.desc, f"index export {e.id} on {on}")
    for sink in dataflow.sink_exports:
        _check_export_id(sink.id, exports, import_ids)
        if sink.from_id not in available:
            raise InvalidDataflow(
                f"sink export {sink.id} reads {sink.from_id}, which is neither imported nor built"
            )
        problem = fits(available[sink.from_id][0], sink.from_desc)
        if problem is not None:
            raise InvalidDataflow(f"sink export {sink.id} describes {sink.from_id} with {problem}")


def _check_export_id(id: GlobalId, exports: set[GlobalId], import_ids: set[GlobalId]) -> None:
    if id in exports:
        raise InvalidDataflow(f"export id {id} is used twice")
    if id in import_ids:
        raise InvalidDataflow(f"export id {id} is also an import")
    exports.add(id)
