"""Structural checks of a ``DataflowDescription`` before the controller accepts it.

A dataflow that fails these checks is refused with :class:`InvalidDataflow` before any state
changes or any command is sent: a duplicate export id or objects out of topological order
are the caller's mistake, caught at the controller rather than on every replica.

Checked: at least one export; export ids unique and distinct from import ids and built ids;
import ids unique; ``objects_to_build`` ids unique and each object reads only imports and
objects built before it (topological order); every index export arranges, and every sink reads,
an imported or built collection; an index export does not target a replica.
"""

from __future__ import annotations

from collections.abc import Iterable

from spate.compute.controller.errors import InvalidDataflow
from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription


def _ids(ids: Iterable[GlobalId]) -> str:
    return ", ".join(str(i) for i in sorted(ids))


def _unique(ids: Iterable[GlobalId], what: str) -> set[GlobalId]:
    seen: set[GlobalId] = set()
    dups: set[GlobalId] = set()
    for i in ids:
        (dups if i in seen else seen).add(i)
    if dups:
        raise InvalidDataflow(f"duplicate {what} id(s): {_ids(dups)}")
    return seen


def validate_dataflow(df: DataflowDescription, *, targeted: bool) -> None:
    """Raise :class:`InvalidDataflow` naming the first structural problem of ``df``."""
    exports = _unique(df.export_ids(), "export")
    if not exports:
        raise InvalidDataflow(f"dataflow {df.debug_name!r} exports nothing")
    imports = _unique(df.import_ids(), "import")
    built = _unique((b.id for b in df.objects_to_build), "built object")
    for what, other in (("imported", imports), ("built", built)):
        clash = exports & other
        if clash:
            raise InvalidDataflow(f"export id(s) {_ids(clash)} are also {what} by the dataflow")
    clash = imports & built
    if clash:
        raise InvalidDataflow(f"id(s) {_ids(clash)} are both imported and built")
    available = set(imports)
    for b in df.objects_to_build:
        missing = b.plan.depends_on() - available
        if missing:
            raise InvalidDataflow(
                f"object {b.id} reads {_ids(missing)}, which is neither imported nor built "
                "before it (objects_to_build must be topologically ordered)"
            )
        available.add(b.id)
    for e in df.index_exports:
        if e.index.on_id not in available:
            raise InvalidDataflow(
                f"index export {e.id} arranges {e.index.on_id}, which the dataflow neither "
                "imports nor builds"
            )
    for s in df.sink_exports:
        if s.from_id not in available:
            raise InvalidDataflow(
                f"sink export {s.id} reads {s.from_id}, which the dataflow neither imports "
                "nor builds"
            )
    if targeted and df.index_exports:
        raise InvalidDataflow(
            f"index export(s) {_ids(e.id for e in df.index_exports)} cannot target a replica: "
            "an index must exist on every replica"
        )
