"""The durable catalog, fenced by the environment's epoch, and readable entry by entry.

The catalog lives in one consensus key as a :class:`CatalogDocument`: the catalog and the epoch
of the environment that owns it. Opening an environment takes a new epoch and *claims* the
catalog (one compare-and-set that writes that epoch; an older epoch can never claim it back).
Every later change is one compare-and-set that also checks the epoch, so the check and the
commit are the same consensus write: an environment opened again elsewhere fences this one at
once, and its changes raise :class:`EnvironmentFenced` without changing anything.

Catalogs written before the epoch was kept beside them (a bare ``CatalogState``) are read as
epoch 0 and upgraded by the first claim.

If the stored catalog cannot be decoded, :class:`CatalogUnreadable` names every entry that
cannot (its name, kind and why) instead of failing the whole open with a protocol error, and
:func:`drop_unreadable_entries` repairs the data directory by removing exactly those entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgpack

from spate.codec import decode, decode_any
from spate.environment.catalog import CatalogState
from spate.environment.durable import DurableDocument
from spate.errors import ProtocolError, SpateError, UsageError
from spate.persist.location import Consensus
from spate.wire import wire

if TYPE_CHECKING:
    from spate.config import Settings

CATALOG_KEY: Final = "environment/catalog"


class EnvironmentFenced(SpateError, RuntimeError):
    """The data directory was opened again (a newer epoch): this environment may no longer
    change the catalog. Close it; the newer one owns the data."""

    def __init__(self, epoch: int, current: int, what: str) -> None:
        self.epoch, self.current = epoch, current
        super().__init__(
            f"{what} refused: this environment (epoch {epoch}) was fenced by a newer one "
            f"(epoch {current}) that opened the same data directory; close this one"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class UnreadableEntry:
    index: int
    name: str
    kind: str
    error: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r} (entry #{self.index}): {self.error}"


class CatalogUnreadable(UsageError, ValueError):
    """Entries of the stored catalog cannot be decoded; they are named, with how to repair."""

    def __init__(self, entries: Sequence[UnreadableEntry], detail: str) -> None:
        self.entries = tuple(entries)
        if entries:
            names = ", ".join(repr(e.name) for e in entries)
            what = "; ".join(str(e) for e in entries)
            fix = (
                "to open the environment without them (their data is dropped), run "
                "spate.environment.catalog_store.drop_unreadable_entries(data_dir, "
                f"[{names}])"
            )
            super().__init__(f"catalog entries cannot be read: {what}; {fix}")
        else:
            super().__init__(f"the catalog cannot be read: {detail}")


@wire("catalog.document")
@dataclasses.dataclass(frozen=True, slots=True)
class CatalogDocument:
    """What the catalog key stores: the catalog and the epoch of the environment owning it."""

    epoch: int
    catalog: CatalogState


def _unreadable(data: bytes, error: ProtocolError) -> CatalogUnreadable:
    """Which entries of an undecodable document fail on their own (and why)."""
    try:
        raw = msgpack.unpackb(data, raw=False, strict_map_key=False)
        fields = raw[2]
        state = fields["catalog"][2] if isinstance(fields, dict) and "catalog" in fields else fields
        items = state["items"]
    except Exception:
        return CatalogUnreadable([], str(error))
    if not isinstance(items, list):
        return CatalogUnreadable([], str(error))
    bad = []
    for i, item in enumerate(items):
        try:
            decode_any(msgpack.packb(item, use_bin_type=True))
        except ProtocolError as e:
            name, kind = "?", "entry"
            if isinstance(item, list) and len(item) == 3:
                kind = str(item[0]).removeprefix("catalog.").replace("_", " ")
                if isinstance(item[2], dict):
                    name = str(item[2].get("name", "?"))
            bad.append(UnreadableEntry(i, name, kind, str(e)))
    return CatalogUnreadable(bad, str(error))


def decode_document(data: bytes) -> CatalogDocument:
    try:
        return decode(data, CatalogDocument)
    except ProtocolError as first:
        try:
            return CatalogDocument(0, decode(data, CatalogState))  # before epochs were kept
        except ProtocolError:
            pass
        raise _unreadable(data, first) from None


class CatalogStore:
    """The catalog of environment ``epoch`` (``None``: read only)."""

    def __init__(self, consensus: Consensus, epoch: int | None = None) -> None:
        self._doc: DurableDocument[CatalogDocument] = DurableDocument(
            consensus, CATALOG_KEY, CatalogDocument, decoder=decode_document
        )
        self.epoch = epoch

    def load(self) -> CatalogState | None:
        doc = self._doc.load()
        return None if doc is None else doc.catalog

    def claim(self) -> CatalogState:
        """Make this environment's epoch the catalog's (at open). Raises ``EnvironmentFenced``
        if a newer environment already claimed it."""
        epoch = self._require_epoch()

        def claim(doc: CatalogDocument | None) -> CatalogDocument:
            if doc is None:
                return CatalogDocument(epoch, CatalogState())
            if doc.epoch > epoch:
                raise EnvironmentFenced(epoch, doc.epoch, "opening the environment")
            return dataclasses.replace(doc, epoch=epoch)

        return self._doc.update(claim).catalog

    def update(self, fn: Callable[[CatalogState | None], CatalogState]) -> CatalogState:
        """Commit ``fn(current)`` if this environment still owns the catalog (one CaS)."""
        epoch = self._require_epoch()

        def change(doc: CatalogDocument | None) -> CatalogDocument:
            current = 0 if doc is None else doc.epoch
            if current != epoch:
                raise EnvironmentFenced(epoch, current, "changing the catalog")
            return CatalogDocument(epoch, fn(None if doc is None else doc.catalog))

        return self._doc.update(change).catalog

    def _require_epoch(self) -> int:
        if self.epoch is None:
            raise UsageError("this catalog was opened read only")
        return self.epoch


def drop_unreadable_entries(
    data_dir: str | Path, names: Sequence[str], *, settings: Settings | None = None
) -> list[str]:
    """Remove the named unreadable entries from the catalog of the environment in ``data_dir``
    (which must not be open); return the names removed. Their collections' data is dropped at
    the next open. Readable entries are never removed."""
    from spate.clock import SystemClock
    from spate.config import Settings as _Settings
    from spate.environment.services import layout_of
    from spate.ids import SystemIdGen
    from spate.persist.client import PersistClient

    wanted = set(names)
    client = PersistClient(
        layout_of(Path(data_dir), settings or _Settings(data_dir=Path(data_dir))).location(),
        clock=SystemClock(),
        ids=SystemIdGen(),
    )
    try:
        consensus = client.consensus
        head = consensus.head(CATALOG_KEY)
        if head is None:
            return []
        try:
            decode_document(head.data)
            return []
        except CatalogUnreadable as e:
            doomed = {u.index for u in e.entries if u.name in wanted}
            removed = [u.name for u in e.entries if u.index in doomed]
        if not doomed:
            return []
        raw: Any = msgpack.unpackb(head.data, raw=False, strict_map_key=False)
        fields = raw[2]
        state = fields["catalog"][2] if "catalog" in fields else fields
        state["items"] = [it for i, it in enumerate(state["items"]) if i not in doomed]
        data = msgpack.packb(raw, use_bin_type=True)
        decode_document(data)  # what is left must read
        if not consensus.compare_and_set(CATALOG_KEY, head.seqno, data):
            raise UsageError(f"{data_dir}: the catalog changed meanwhile (is it open?); retry")
        return removed
    finally:
        client.close()
