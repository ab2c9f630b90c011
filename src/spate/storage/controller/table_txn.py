"""Atomic multi-table appends: one durable *intent* per call, then idempotent per-shard writes.

A call ``append([(t1, …), (t2, …)])`` must land in every table or in none, even if the
controller dies between two shards. The protocol (in the spirit
of a transactional write-ahead log over shards):

1. **Check** every table's shard upper is the expected one (``InvalidUppers`` otherwise;
   nothing written).
2. **Stage** the data: a small call's updates travel inside the intent; a large call's updates
   are written first as blobs under ``storage-controller/txn/<token>/`` (outside every shard's
   prefix, so shard GC never touches them), each with its BLAKE2b digest.
3. **Commit**: one compare-and-set of the consensus key ``storage-controller/table-txn`` records
   the :class:`TableIntent` — tables, shards, ``[lower, upper)`` per table, the data or its
   staged blob. This CaS is the commit point, and it is fenced: it only succeeds while the
   document's epoch is this controller's.
4. **Apply** to each shard with persist's ``append(lower, upper)``: a shard already at or past
   ``upper`` is a no-op success, so applying again — after a crash, from a new writer id, by the
   next controller — never duplicates anything.
5. **Clear** the intent (lazily: the next commit overwrites an applied intent, and maintenance
   clears it); then the staged blobs are deleted.

A controller that opens (or is promoted) claims the document for its epoch and finishes a
pending intent before anything else, so a crash anywhere after step 3 ends with every table
written exactly once, and a crash before it with none. Readers stay consistent meanwhile: a
table's upper only moves together with its data, so a read at a time waits for every table of
the call or sees all of them.

The check of step 1 and the commit of step 3 are not one atomic step across shards: a foreign
writer that advances a table shard in between (only a fenced controller or a bug can: tables
have one writer) makes that shard's application a trim (``lower < upper`` of the shard) or a
no-op; it is logged as an error. Staged blobs of a call that died before its commit are swept
when the next controller claims the document.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.ipc as ipc

from spate.codec import decode, encode
from spate.errors import Determinate
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, ShardId
from spate.persist.client import PersistClient
from spate.persist.errors import CorruptBatch
from spate.storage.controller.errors import ControllerFenced
from spate.wire import wire

_log: Final = logging.getLogger("spate.storage.controller")

TXN_KEY: Final = "storage-controller/table-txn"
STAGED_PREFIX: Final = "storage-controller/txn/"
INLINE_MAX_BYTES: Final = 1 << 20
"""A call whose updates take more (in memory) is staged as blobs instead of riding inline."""

_MAX_ATTEMPTS: Final = 100


@wire("storage.controller.intent_write")
@dataclass(frozen=True, slots=True)
class IntentWrite:
    """One table's part of an intent: its updates in ``[lower, upper)``, inline or staged."""

    id: GlobalId
    shard: ShardId
    lower: Frontier
    upper: Frontier
    updates: pa.Table | None
    staged_key: str | None = None
    staged_digest: bytes | None = None


@wire("storage.controller.table_intent")
@dataclass(frozen=True, slots=True)
class TableIntent:
    """A committed multi-table append that MUST be applied to every shard (module docs)."""

    token: uuid.UUID
    writes: tuple[IntentWrite, ...]


@wire("storage.controller.table_txn")
@dataclass(frozen=True, slots=True)
class TableTxnState:
    """The document: the epoch of the controller that may commit, and at most one intent."""

    epoch: int = 0
    pending: TableIntent | None = None


@dataclass(frozen=True, slots=True)
class StagedWrite:
    """What a caller hands to :meth:`TableTxnLog.stage` for one table."""

    id: GlobalId
    shard: ShardId
    lower: Frontier
    upper: Frontier
    updates: pa.Table | None


class TableTxnLog:
    """The intent document and staged blobs of one deployment (module docs). Blocking I/O.

    Obligations of callers: ``claim`` before anything else; serialise ``commit`` / ``clear``
    (one call at a time); apply a committed intent to every shard before committing another.
    """

    def __init__(
        self,
        persist: PersistClient,
        *,
        key: str = TXN_KEY,
        inline_max_bytes: int = INLINE_MAX_BYTES,
    ) -> None:
        if inline_max_bytes < 0:
            raise ValueError(f"inline_max_bytes must be >= 0, got {inline_max_bytes}")
        self._consensus = persist.consensus
        self._blob = persist.blob
        self._key = key
        self._inline_max = inline_max_bytes
        self._epoch: int | None = None
        self._seqno: int | None = None
        self._state = TableTxnState()

    # -- the document ---------------------------------------------------------------------------

    def _load(self) -> TableTxnState:
        head = self._consensus.head(self._key)
        if head is None:
            self._seqno, self._state = None, TableTxnState()
        else:
            self._seqno, self._state = head.seqno, decode(head.data, TableTxnState)
        return self._state

    def _cas(self, new: TableTxnState) -> bool:
        if not self._consensus.compare_and_set(self._key, self._seqno, encode(new)):
            return False
        self._seqno = 0 if self._seqno is None else self._seqno + 1
        self._state = new
        return True

    def _check(self, state: TableTxnState, where: str) -> None:
        assert self._epoch is not None, "claim the table txn log first"
        if state.epoch != self._epoch:
            raise ControllerFenced(self._epoch, state.epoch, where)

    def claim(self, epoch: int) -> TableIntent | None:
        """Make ``epoch`` the only one that may commit; return the intent left pending (by a
        predecessor or an earlier life of this controller), which the caller MUST apply."""
        for _ in range(_MAX_ATTEMPTS):
            state = self._load()
            if state.epoch > epoch:
                raise ControllerFenced(epoch, state.epoch, "claiming the table write log")
            if self._cas(TableTxnState(epoch, state.pending)):
                self._epoch = epoch
                return state.pending
        raise Determinate(f"consensus key {self._key}: gave up after {_MAX_ATTEMPTS} CaS")

    def check_epoch(self) -> None:
        """``ControllerFenced`` if a newer controller claimed the log (a read, not a CaS)."""
        self._check(self._load(), "writing a table")

    def commit(self, intent: TableIntent, *, replaces: uuid.UUID | None) -> None:
        """Record ``intent`` (the commit point). An intent still recorded is overwritten only
        if it is ``replaces`` (one known to be applied). ``ControllerFenced`` if a newer
        controller claimed the log."""
        for _ in range(_MAX_ATTEMPTS):
            state = self._state
            self._check(state, "committing a table write")
            pending = state.pending
            if pending is not None and pending.token != replaces:
                raise RuntimeError(
                    f"table write {pending.token} is still pending; apply it before committing"
                )
            if self._cas(TableTxnState(state.epoch, intent)):
                return
            self._load()
        raise Determinate(f"consensus key {self._key}: gave up after {_MAX_ATTEMPTS} CaS")

    def clear(self, token: uuid.UUID) -> bool:
        """Forget the applied intent ``token`` (no-op if another one is recorded); truncate
        old versions. ``ControllerFenced`` if a newer controller claimed the log."""
        for _ in range(_MAX_ATTEMPTS):
            state = self._state
            self._check(state, "clearing a table write")
            if state.pending is None or state.pending.token != token:
                return False
            if self._cas(TableTxnState(state.epoch, None)):
                assert self._seqno is not None
                self._consensus.truncate(self._key, self._seqno)
                return True
            self._load()
        raise Determinate(f"consensus key {self._key}: gave up after {_MAX_ATTEMPTS} CaS")

    @property
    def pending(self) -> TableIntent | None:
        """The intent recorded as of the last read or write of the document."""
        return self._state.pending

    # -- data -----------------------------------------------------------------------------------

    def stage(self, token: uuid.UUID, writes: list[StagedWrite]) -> TableIntent:
        """Build the intent; write the updates as blobs first if they are large."""
        size = sum(w.updates.nbytes for w in writes if w.updates is not None)
        out: list[IntentWrite] = []
        for w in writes:
            if w.updates is None or size <= self._inline_max:
                out.append(IntentWrite(w.id, w.shard, w.lower, w.upper, w.updates))
                continue
            key = f"{STAGED_PREFIX}{token.hex}/{w.id}"
            data = _to_ipc(w.updates)
            self._blob.set(key, data)
            digest = hashlib.blake2b(data, digest_size=32).digest()
            out.append(IntentWrite(w.id, w.shard, w.lower, w.upper, None, key, digest))
        return TableIntent(token, tuple(out))

    def updates(self, write: IntentWrite) -> pa.Table | None:
        """The updates of one table of an intent (read back and verified if staged)."""
        if write.staged_key is None:
            return write.updates
        data = self._blob.get(write.staged_key)
        if data is None:
            raise CorruptBatch(write.staged_key, "the staged updates of a table write are gone")
        if hashlib.blake2b(data, digest_size=32).digest() != write.staged_digest:
            raise CorruptBatch(write.staged_key, "checksum mismatch of staged table updates")
        with ipc.open_stream(pa.py_buffer(data)) as reader:
            return reader.read_all()

    def discard(self, intent: TableIntent) -> None:
        """Delete the staged blobs of ``intent`` (applied, or never committed)."""
        for w in intent.writes:
            if w.staged_key is not None:
                self._blob.delete(w.staged_key)

    def sweep(self, keep: TableIntent | None) -> int:
        """Delete staged blobs of every intent but ``keep`` (calls that died before their
        commit). Only safe right after ``claim``: no older controller can commit any more."""
        kept = set() if keep is None else {w.staged_key for w in keep.writes}
        gone = 0
        for key, _size in list(self._blob.list_keys(STAGED_PREFIX)):
            if key not in kept:
                self._blob.delete(key)
                gone += 1
        return gone


def _to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    options = ipc.IpcWriteOptions(compression="zstd")
    with ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
