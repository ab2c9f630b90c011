"""The durable catalog, fenced by the environment's epoch, and readable entry by entry.

The catalog lives in one consensus key: a :class:`CatalogDocument` (the whole catalog and the
epoch of the environment that owns it), then one version per change after it
(:class:`~spate.environment.catalog_change.CatalogChange`: only what the change changed, and the
epoch that made it); see :class:`CatalogStore`. Opening an environment takes a new epoch and
*claims* the catalog (one compare-and-set that writes the whole catalog with that epoch; an
older epoch can never claim it back). Every later change is one compare-and-set at the version
this environment last read or wrote, whose epoch is its own: if it succeeds, nothing came in
between, so the check and the commit are the same consensus write. An environment opened again
elsewhere fences this one at once, and its changes raise :class:`EnvironmentFenced` without
changing anything.

Catalogs written before the epoch was kept beside them (a bare ``CatalogState``) are read as
epoch 0 and upgraded by the first claim; catalogs written whole at every change (before the
log of changes) are read as their last version.

If the stored catalog cannot be decoded, :class:`CatalogUnreadable` names every entry that
cannot (its name, kind and why) instead of failing the whole open with a protocol error, and
:func:`drop_unreadable_entries` repairs the data directory by removing exactly those entries.
Only a whole catalog can hold such entries (a change is proven to decode before it is
committed, and an environment that cannot read its catalog writes nothing), and a cleanly closed
environment leaves its catalog whole (:meth:`CatalogStore.compact`), so the repair reads the
last version only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgpack

from spate.codec import decode, decode_any
from spate.environment.catalog import CatalogState
from spate.environment.catalog_change import CatalogChange, apply, diff
from spate.errors import Determinate, ProtocolError, SpateError, UsageError
from spate.persist.consensus import VersionedData, next_seqno
from spate.persist.document import checked_encode
from spate.persist.location import Consensus
from spate.wire import wire

if TYPE_CHECKING:
    from spate.config import Settings

CATALOG_KEY: Final = "environment/catalog"
_MAX_ATTEMPTS: Final = 100
_MAX_CHANGES: Final = 1_000
"""At most this many changes follow a snapshot."""
_MIN_SNAPSHOT_BYTES: Final = 64 * 1024
"""Changes since the last snapshot may total this many bytes even when it is smaller."""


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
    """The catalog of environment ``epoch`` (``None``: read only).

    The key's versions are a log: a snapshot (:class:`CatalogDocument`, or a bare
    ``CatalogState`` from before epochs) followed by changes (:class:`CatalogChange`), each
    committed by one fenced compare-and-set as before. The catalog is the last snapshot with
    the later changes applied. A change is written instead of the whole catalog while the
    changes since the last snapshot are smaller in bytes than it (and fewer than
    ``_MAX_CHANGES``); otherwise the whole catalog is written and the versions before it are
    truncated. Bytes written and values encoded per change thus depend on what changed, and
    over any sequence of changes the snapshots cost at most what the changes did (amortised
    constant per change). The store keeps the state it last read or wrote, and reads only the
    versions after it.
    """

    def __init__(self, consensus: Consensus, epoch: int | None = None) -> None:
        self._consensus = consensus
        self.epoch = epoch
        self._seqno: int | None = None
        self._doc: CatalogDocument | None = None
        self._snapshot_bytes = 0
        self._changes = 0
        self._change_bytes = 0

    def load(self) -> CatalogState | None:
        doc = self._read()
        return None if doc is None else doc.catalog

    def claim(self) -> CatalogState:
        """Make this environment's epoch the catalog's (at open), writing it whole. Raises
        ``EnvironmentFenced`` if a newer environment already claimed it."""
        epoch = self._require_epoch()
        for _ in range(_MAX_ATTEMPTS):
            doc = self._read()
            if doc is not None and doc.epoch > epoch:
                raise EnvironmentFenced(epoch, doc.epoch, "opening the environment")
            state = CatalogState() if doc is None else doc.catalog
            if self._commit_snapshot(CatalogDocument(epoch, state)):
                return state
        raise Determinate(f"consensus key {CATALOG_KEY}: gave up after {_MAX_ATTEMPTS} CaS")

    def update(self, fn: Callable[[CatalogState | None], CatalogState]) -> CatalogState:
        """Commit ``fn(current)`` if this environment still owns the catalog (one CaS)."""
        epoch = self._require_epoch()
        doc = self._doc if self._seqno is not None else self._read()
        for _ in range(_MAX_ATTEMPTS):
            current = 0 if doc is None else doc.epoch
            if current != epoch:
                raise EnvironmentFenced(epoch, current, "changing the catalog")
            new = fn(None if doc is None else doc.catalog)
            if doc is None or self._snapshot_due():
                committed = self._commit_snapshot(CatalogDocument(epoch, new))
            else:
                committed = self._commit_change(doc.catalog, new, epoch)
            if committed:
                return new
            doc = self._read()  # someone else committed: read what they did and retry
        raise Determinate(f"consensus key {CATALOG_KEY}: gave up after {_MAX_ATTEMPTS} CaS")

    def compact(self) -> None:
        """Write the catalog whole if changes follow its last snapshot (so that the next open
        reads one version). Raises ``EnvironmentFenced`` like :meth:`update`."""
        epoch = self._require_epoch()
        for _ in range(_MAX_ATTEMPTS):
            doc = self._read()
            if doc is None or self._changes == 0:
                return
            if doc.epoch != epoch:
                raise EnvironmentFenced(epoch, doc.epoch, "changing the catalog")
            if self._commit_snapshot(CatalogDocument(epoch, doc.catalog)):
                return

    # -- writing ---------------------------------------------------------------------------------

    def _snapshot_due(self) -> bool:
        return self._changes >= _MAX_CHANGES or self._change_bytes > max(
            self._snapshot_bytes, _MIN_SNAPSHOT_BYTES
        )

    def _commit_change(self, old: CatalogState, new: CatalogState, epoch: int) -> bool:
        change = diff(old, new, epoch=epoch)
        if apply(old, change) != new:  # not expressible as a change: write it whole
            return self._commit_snapshot(CatalogDocument(epoch, new))
        data = checked_encode(CATALOG_KEY, change, CatalogChange)
        if not self._consensus.compare_and_set(CATALOG_KEY, self._seqno, data):
            return False
        self._seqno = next_seqno(self._seqno)
        self._doc = CatalogDocument(epoch, new)
        self._changes += 1
        self._change_bytes += len(data)
        return True

    def _commit_snapshot(self, doc: CatalogDocument) -> bool:
        data = checked_encode(CATALOG_KEY, doc, CatalogDocument)
        if not self._consensus.compare_and_set(CATALOG_KEY, self._seqno, data):
            return False
        self._seqno = next_seqno(self._seqno)
        self._doc = doc
        self._snapshot_bytes, self._changes, self._change_bytes = len(data), 0, 0
        if self._seqno > 0:
            self._consensus.truncate(CATALOG_KEY, self._seqno)
        return True

    # -- reading ---------------------------------------------------------------------------------

    def _read(self) -> CatalogDocument | None:
        """The committed catalog: the versions after the one this store holds, applied to it
        (all versions from the last snapshot when it holds none, or they were truncated)."""
        head = self._consensus.head(CATALOG_KEY)
        if head is None:
            self._seqno, self._doc = None, None
            self._snapshot_bytes, self._changes, self._change_bytes = 0, 0, 0
            return None
        if self._seqno is not None and head.seqno == self._seqno:
            return self._doc
        if self._seqno is not None and head.seqno > self._seqno:
            newer = self._consensus.scan(CATALOG_KEY, self._seqno + 1, head.seqno - self._seqno)
            if newer and newer[-1].seqno == head.seqno and newer[0].seqno == self._seqno + 1:
                return self._replay(newer, self._doc)
        return self._replay(self._all_versions(), None)

    def _all_versions(self) -> list[VersionedData]:
        out: list[VersionedData] = []
        while True:
            page = self._consensus.scan(
                CATALOG_KEY, out[-1].seqno + 1 if out else 0, _MAX_CHANGES + 1
            )
            out += page
            if len(page) <= _MAX_CHANGES:
                return out

    def _replay(
        self, versions: list[VersionedData], doc: CatalogDocument | None
    ) -> CatalogDocument | None:
        """``doc`` with ``versions`` (consecutive, following it) applied; only the versions
        from the last snapshot among them on are decoded."""
        decoded: list[tuple[VersionedData, CatalogDocument | CatalogChange]] = []
        for v in reversed(versions):
            value = _decode_version(v.data)
            decoded.append((v, value))
            if isinstance(value, CatalogDocument):
                break
        decoded.reverse()
        if not isinstance(decoded[0][1], CatalogDocument) and doc is None:
            raise CatalogUnreadable([], "the catalog's versions hold no snapshot")
        for v, value in decoded:
            if isinstance(value, CatalogDocument):
                doc = value
                self._snapshot_bytes, self._changes, self._change_bytes = len(v.data), 0, 0
            else:
                assert doc is not None
                doc = CatalogDocument(value.epoch, apply(doc.catalog, value))
                self._changes += 1
                self._change_bytes += len(v.data)
        self._seqno, self._doc = versions[-1].seqno, doc
        return doc

    def _require_epoch(self) -> int:
        if self.epoch is None:
            raise UsageError("this catalog was opened read only")
        return self.epoch


def _decode_version(data: bytes) -> CatalogDocument | CatalogChange:
    """One stored version: a change, or a snapshot (of any format this version reads)."""
    try:
        value = decode_any(data)
    except ProtocolError:
        return decode_document(data)  # raises CatalogUnreadable, naming the entries
    if isinstance(value, CatalogChange):
        return value
    if isinstance(value, CatalogDocument):
        return value
    if isinstance(value, CatalogState):
        return CatalogDocument(0, value)
    raise CatalogUnreadable([], f"a catalog version holds a {type(value).__name__}")


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
            CatalogStore(consensus).load()  # the catalog reads (a change at its head, too)
            return []
        except CatalogUnreadable:
            pass
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
