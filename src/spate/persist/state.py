"""Shard state and its pure transitions (no I/O, no clock: ``now_ms`` is passed in).

A shard's durable state is one :class:`ShardState` per consensus seqno. Every change is a pure
function ``transition(state, …) -> Apply(new_state | None, result)`` (``None``: nothing to
write); :mod:`spate.persist.machine` applies it by compare-and-set and re-runs it on the fresh
state when the CaS loses, so every transition is written to be safe to re-run — in particular
after an indeterminate CaS that may already have committed.

Invariants (checked in :func:`check_invariants`, which the machine runs on every new state):

* ``since`` and ``upper`` never regress (P3);
* ``since`` is the meet of the readers' (leased and critical) sinces; with no readers it stays;
* batches are contiguous: ``batches[i].upper == batches[i+1].lower``, and the last batch's upper
  is the shard's upper; only the last batch may have no parts;
* a batch ``(lower, upper, since)`` holds updates with times in ``[lower, upper)``, those below
  its ``since`` advanced to ``since``; so it accumulates correctly at every time ``>= since``;
* a tombstone has ``since == upper == {}``, no batches, no readers and no writers.

``last_retire_seqno`` is the seqno of the latest state that stopped referencing blobs (a
compaction or a finalization): once every reader's seqno hold is at or beyond it, GC has work.

The encoding (:mod:`spate.persist.state_codec`) is strict, versioned msgpack: nothing is
unpickled.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Generic, TypeVar

from spate.errors import InvariantViolation, SchemaMismatch
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import CriticalReaderId, ReaderId, ShardId, WriterId
from spate.persist.errors import InvalidAppend, LeaseExpired, NotFinalizable
from spate.repr.desc import RelationDesc

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class BatchPart:
    """One Parquet blob of a batch: its key, exact size, update count and BLAKE2b-256 digest."""

    key: str
    encoded_size: int
    num_updates: int
    checksum: bytes


@dataclass(frozen=True, slots=True)
class HollowBatch:
    """A batch by reference: updates in ``[lower, upper)``, times below ``since`` advanced."""

    lower: Frontier
    upper: Frontier
    since: Frontier
    parts: tuple[BatchPart, ...]

    @property
    def num_updates(self) -> int:
        return sum(p.num_updates for p in self.parts)

    @property
    def encoded_size(self) -> int:
        return sum(p.encoded_size for p in self.parts)

    def is_empty(self) -> bool:
        return not self.parts


@dataclass(frozen=True, slots=True)
class WriterState:
    """A registered writer: its lease and its most recent committed write (for idempotency)."""

    last_heartbeat_ms: int
    lease_duration_ms: int
    most_recent_token: uuid.UUID | None
    most_recent_upper: Frontier


@dataclass(frozen=True, slots=True)
class LeasedReaderState:
    """A leased reader: its since, the seqno it holds back GC at, and its lease."""

    since: Frontier
    seqno: int
    last_heartbeat_ms: int
    lease_duration_ms: int


@dataclass(frozen=True, slots=True)
class CriticalReaderState:
    """A critical reader: its since and opaque token (the controller epoch; 0 = unset)."""

    since: Frontier
    opaque: int


@dataclass(frozen=True, slots=True)
class ShardState:
    """The durable state of one shard at one seqno (treat the dicts as immutable)."""

    shard_id: ShardId
    seqno: int
    since: Frontier
    upper: Frontier
    batches: tuple[HollowBatch, ...]
    writers: dict[WriterId, WriterState]
    leased_readers: dict[ReaderId, LeasedReaderState]
    critical_readers: dict[CriticalReaderId, CriticalReaderState]
    desc: RelationDesc | None
    tombstone: bool
    walltime_ms: int
    last_retire_seqno: int

    @staticmethod
    def initial(shard_id: ShardId) -> ShardState:
        """The state of a shard nobody has written: since = upper = ``{0}``."""
        return ShardState(
            shard_id=shard_id,
            seqno=0,
            since=Antichain.minimum(),
            upper=Antichain.minimum(),
            batches=(),
            writers={},
            leased_readers={},
            critical_readers={},
            desc=None,
            tombstone=False,
            walltime_ms=0,
            last_retire_seqno=0,
        )

    def part_keys(self) -> frozenset[str]:
        return frozenset(p.key for b in self.batches for p in b.parts)

    @property
    def num_updates(self) -> int:
        return sum(b.num_updates for b in self.batches)

    @property
    def encoded_size(self) -> int:
        return sum(b.encoded_size for b in self.batches)

    def is_finalized(self) -> bool:
        return self.tombstone

    def seqno_since(self) -> int:
        """The oldest seqno a reader may still read: GC keeps every state from here on."""
        return min([self.seqno, *(r.seqno for r in self.leased_readers.values())])


@dataclass(frozen=True, slots=True)
class Apply(Generic[R]):
    """The outcome of a transition: the state to write (``None``: no change) and a result."""

    state: ShardState | None
    result: R


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Appended:
    """The append committed (``deduplicated``: by an earlier attempt with the same token)."""

    upper: Frontier
    deduplicated: bool


@dataclass(frozen=True, slots=True)
class UpperMismatch:
    """A ``compare_and_append`` whose ``expected`` upper was not the shard's ``current`` upper.

    An expected outcome (another writer won), returned as a value. Nothing was written.
    """

    expected: Frontier
    current: Frontier


@dataclass(frozen=True, slots=True)
class SinceDowngraded:
    """A critical reader's since and opaque after a successful compare-and-downgrade."""

    since: Frontier
    opaque: int


@dataclass(frozen=True, slots=True)
class OpaqueMismatch:
    """``compare_and_downgrade_since`` expected ``expected`` but the stored opaque is ``current``.

    Nothing changed. For controllers, ``current`` is the epoch of the controller that holds
    the shard now.
    """

    expected: int
    current: int
    since: Frontier


# --- helpers ---------------------------------------------------------------------------------


def _since_of(s: ShardState) -> Frontier:
    """The meet of all readers' sinces; the old since if there are no readers (never regress)."""
    sinces = [r.since for r in s.leased_readers.values()] + [
        r.since for r in s.critical_readers.values()
    ]
    if not sinces:
        return s.since
    out: Frontier = Antichain.empty()
    for x in sinces:
        out = out.meet(x)
    # A reader never holds a since below the shard's (readers register at the shard since).
    return s.since.join(out)


def _with(s: ShardState, **changes: object) -> ShardState:
    new = dataclasses.replace(s, **changes)  # type: ignore[arg-type]
    return dataclasses.replace(new, since=_since_of(new))


def expire_stale(
    s: ShardState, now_ms: int, *, keep: WriterId | ReaderId | None = None
) -> ShardState:
    """Drop writers and leased readers whose lease ran out before ``now_ms``.

    ``keep`` (the handle making this change) is spared: a handle whose lease ran out but that
    nobody expired yet is still registered, and its own call renews it.
    """
    writers = {
        w: st
        for w, st in s.writers.items()
        if w == keep or now_ms - st.last_heartbeat_ms <= st.lease_duration_ms
    }
    readers = {
        r: st
        for r, st in s.leased_readers.items()
        if r == keep or now_ms - st.last_heartbeat_ms <= st.lease_duration_ms
    }
    if len(writers) == len(s.writers) and len(readers) == len(s.leased_readers):
        return s
    return _with(s, writers=writers, leased_readers=readers)


def _check_desc(s: ShardState, desc: RelationDesc | None) -> ShardState:
    if desc is None:
        return s
    if s.desc is None:
        return dataclasses.replace(s, desc=desc)
    if s.desc != desc:
        raise SchemaMismatch(f"shard {s.shard_id}", None, None, f"{s.desc}", f"{desc}")
    return s


def check_invariants(old: ShardState, new: ShardState) -> None:
    """Raise :class:`InvariantViolation` unless ``old -> new`` keeps the shard's invariants."""
    sid = new.shard_id
    if not old.since.less_equal(new.since):
        raise InvariantViolation(f"shard {sid}: since regressed from {old.since} to {new.since}")
    if not old.upper.less_equal(new.upper):
        raise InvariantViolation(f"shard {sid}: upper regressed from {old.upper} to {new.upper}")
    if new.tombstone:
        if not (new.since.is_empty() and new.upper.is_empty() and not new.batches):
            raise InvariantViolation(f"shard {sid}: tombstone with data or open frontiers")
        return
    for a, b in zip(new.batches, new.batches[1:], strict=False):
        if a.upper != b.lower:
            raise InvariantViolation(
                f"shard {sid}: batches not contiguous: "
                f"{a.lower}..{a.upper} then {b.lower}..{b.upper}"
            )
        if a.is_empty():
            raise InvariantViolation(f"shard {sid}: an empty batch before the last one")
    if new.batches and new.batches[-1].upper != new.upper:
        raise InvariantViolation(
            f"shard {sid}: last batch ends at {new.batches[-1].upper}, upper is {new.upper}"
        )


def _append_batch(batches: tuple[HollowBatch, ...], batch: HollowBatch) -> tuple[HollowBatch, ...]:
    """Add ``batch`` after ``batches``, folding an empty last batch into it (no I/O)."""
    if batches and batches[-1].is_empty():
        last = batches[-1]
        if batch.is_empty():
            return (*batches[:-1], dataclasses.replace(last, upper=batch.upper))
        return (*batches[:-1], dataclasses.replace(batch, lower=last.lower))
    return (*batches, batch)


def fold_empty(batches: tuple[HollowBatch, ...]) -> tuple[HollowBatch, ...]:
    """Fold every empty batch that is not last into the lower of the batch after it."""
    out: list[HollowBatch] = []
    pending_lower: Frontier | None = None
    last = len(batches) - 1
    for i, b in enumerate(batches):
        if pending_lower is not None:
            b = dataclasses.replace(b, lower=pending_lower)
            pending_lower = None
        if b.is_empty() and i != last:
            pending_lower = b.lower
            continue
        out.append(b)
    return tuple(out)


# --- writers ---------------------------------------------------------------------------------


def register_writer(
    s: ShardState, writer_id: WriterId, *, now_ms: int, lease_ms: int, desc: RelationDesc | None
) -> Apply[Frontier]:
    """Register (or heartbeat) ``writer_id``; result: the shard's upper."""
    if s.tombstone:
        return Apply(None, s.upper)
    s = _check_desc(expire_stale(s, now_ms, keep=writer_id), desc)
    old = s.writers.get(writer_id)
    st = WriterState(
        last_heartbeat_ms=now_ms,
        lease_duration_ms=lease_ms,
        most_recent_token=old.most_recent_token if old else None,
        most_recent_upper=old.most_recent_upper if old else Antichain.minimum(),
    )
    return Apply(_with(s, writers={**s.writers, writer_id: st}), s.upper)


def heartbeat_writer(s: ShardState, writer_id: WriterId, *, now_ms: int) -> Apply[None]:
    if s.tombstone:
        return Apply(None, None)
    s = expire_stale(s, now_ms, keep=writer_id)
    old = s.writers.get(writer_id)
    if old is None:
        raise LeaseExpired(str(s.shard_id), f"writer {writer_id}")
    st = dataclasses.replace(old, last_heartbeat_ms=now_ms)
    return Apply(_with(s, writers={**s.writers, writer_id: st}), None)


def expire_writer(s: ShardState, writer_id: WriterId) -> Apply[None]:
    if writer_id not in s.writers:
        return Apply(None, None)
    writers = {w: st for w, st in s.writers.items() if w != writer_id}
    return Apply(_with(s, writers=writers), None)


def compare_and_append(
    s: ShardState,
    *,
    writer_id: WriterId,
    batch: HollowBatch,
    token: uuid.UUID,
    now_ms: int,
) -> Apply[Appended | UpperMismatch]:
    """Append ``batch`` if the shard's upper is ``batch.lower``, advancing it to ``batch.upper``.

    Idempotent: if any writer's most recent committed write carries ``token``, the result is
    ``Appended(deduplicated=True)`` and nothing changes — even if the upper moved on since.
    A writer that is no longer registered gets :class:`LeaseExpired` (on a tombstone, every
    append is an ``UpperMismatch`` with ``current = {}``).
    """
    sid = str(s.shard_id)
    for w, st in s.writers.items():
        if st.most_recent_token == token:
            if st.most_recent_upper != batch.upper:
                raise InvalidAppend(
                    f"shard {sid}: idempotency token {token} was used by writer {w} for a write "
                    f"to upper {st.most_recent_upper}, not {batch.upper}"
                )
            return Apply(None, Appended(st.most_recent_upper, deduplicated=True))
    if s.tombstone:
        return Apply(None, UpperMismatch(expected=batch.lower, current=s.upper))
    s = expire_stale(s, now_ms, keep=writer_id)
    # Checked before the upper: a mismatch then proves this writer's write did not commit
    # (its token would be its most recent), so the caller may delete the batch's blobs.
    if writer_id not in s.writers:
        raise LeaseExpired(sid, f"writer {writer_id}")
    if s.upper != batch.lower:
        return Apply(None, UpperMismatch(expected=batch.lower, current=s.upper))
    st = WriterState(
        last_heartbeat_ms=now_ms,
        lease_duration_ms=s.writers[writer_id].lease_duration_ms,
        most_recent_token=token,
        most_recent_upper=batch.upper,
    )
    writers = {**s.writers, writer_id: st}
    if batch.lower == batch.upper:
        # A no-op write: only a heartbeat (and the token, so a retry is recognised).
        return Apply(_with(s, writers=writers), Appended(s.upper, deduplicated=False))
    batches = _append_batch(s.batches, batch)
    return Apply(
        _with(s, writers=writers, batches=batches, upper=batch.upper),
        Appended(batch.upper, deduplicated=False),
    )


# --- leased readers --------------------------------------------------------------------------


def register_leased_reader(
    s: ShardState,
    reader_id: ReaderId,
    *,
    now_ms: int,
    lease_ms: int,
    desc: RelationDesc | None,
) -> Apply[LeasedReaderState]:
    """Register ``reader_id`` at the shard's since, holding GC at the current seqno."""
    if s.tombstone:
        st = LeasedReaderState(s.since, s.seqno, now_ms, lease_ms)
        return Apply(None, st)
    s = _check_desc(expire_stale(s, now_ms, keep=reader_id), desc)
    old = s.leased_readers.get(reader_id)
    st = LeasedReaderState(
        since=old.since if old else s.since,
        seqno=old.seqno if old else s.seqno,
        last_heartbeat_ms=now_ms,
        lease_duration_ms=lease_ms,
    )
    return Apply(_with(s, leased_readers={**s.leased_readers, reader_id: st}), st)


def _reader(s: ShardState, reader_id: ReaderId) -> LeasedReaderState:
    st = s.leased_readers.get(reader_id)
    if st is None:
        raise LeaseExpired(str(s.shard_id), f"leased reader {reader_id}")
    return st


def heartbeat_leased_reader(
    s: ShardState, reader_id: ReaderId, *, now_ms: int
) -> Apply[LeasedReaderState]:
    if s.tombstone:
        return Apply(None, LeasedReaderState(s.since, s.seqno, now_ms, 0))
    s = expire_stale(s, now_ms, keep=reader_id)
    st = dataclasses.replace(_reader(s, reader_id), last_heartbeat_ms=now_ms)
    return Apply(_with(s, leased_readers={**s.leased_readers, reader_id: st}), st)


def downgrade_since(
    s: ShardState, reader_id: ReaderId, new_since: Frontier, *, now_ms: int
) -> Apply[LeasedReaderState]:
    """Move the reader's since forward to ``new_since`` (a lower request keeps the old since).

    Also renews the lease and moves the reader's seqno hold to the current seqno.
    """
    if s.tombstone:
        return Apply(None, LeasedReaderState(s.since, s.seqno, now_ms, 0))
    s = expire_stale(s, now_ms, keep=reader_id)
    old = _reader(s, reader_id)
    st = LeasedReaderState(
        since=old.since.join(new_since),
        seqno=max(old.seqno, s.seqno),
        last_heartbeat_ms=now_ms,
        lease_duration_ms=old.lease_duration_ms,
    )
    return Apply(_with(s, leased_readers={**s.leased_readers, reader_id: st}), st)


def expire_leased_reader(s: ShardState, reader_id: ReaderId) -> Apply[None]:
    if reader_id not in s.leased_readers:
        return Apply(None, None)
    readers = {r: st for r, st in s.leased_readers.items() if r != reader_id}
    return Apply(_with(s, leased_readers=readers), None)


# --- critical readers ------------------------------------------------------------------------


def register_critical_reader(
    s: ShardState, reader_id: CriticalReaderId
) -> Apply[CriticalReaderState]:
    """Register ``reader_id`` at the shard's since with opaque 0, unless it exists."""
    old = s.critical_readers.get(reader_id)
    if old is not None:
        return Apply(None, old)
    st = CriticalReaderState(since=s.since, opaque=0)
    if s.tombstone:
        return Apply(None, st)
    return Apply(_with(s, critical_readers={**s.critical_readers, reader_id: st}), st)


def compare_and_downgrade_since(
    s: ShardState,
    reader_id: CriticalReaderId,
    *,
    expected_opaque: int,
    new_opaque: int,
    new_since: Frontier,
) -> Apply[SinceDowngraded | OpaqueMismatch]:
    """If the stored opaque is ``expected_opaque``: store ``new_opaque``, since = max(old, new).

    Re-running after an indeterminate success finds ``new_opaque`` stored with a since at or
    beyond ``new_since`` and reports success without writing again.
    """
    if s.tombstone:
        return Apply(None, SinceDowngraded(s.since, new_opaque))
    old = s.critical_readers.get(reader_id)
    if old is None:
        raise LeaseExpired(str(s.shard_id), f"critical reader {reader_id} (not registered)")
    if old.opaque != expected_opaque:
        if old.opaque == new_opaque and new_since.less_equal(old.since):
            return Apply(None, SinceDowngraded(old.since, old.opaque))
        return Apply(None, OpaqueMismatch(expected_opaque, old.opaque, old.since))
    st = CriticalReaderState(since=old.since.join(new_since), opaque=new_opaque)
    if st == old:
        return Apply(None, SinceDowngraded(st.since, st.opaque))
    new = _with(s, critical_readers={**s.critical_readers, reader_id: st})
    return Apply(new, SinceDowngraded(st.since, st.opaque))


# --- compaction and finalization -------------------------------------------------------------


def apply_compaction(
    s: ShardState, inputs: tuple[HollowBatch, ...], output: HollowBatch
) -> Apply[bool]:
    """Replace the run ``inputs`` (still present, contiguous) by ``output``; else no change.

    ``output`` must span ``inputs`` exactly, and its since must not be beyond the shard's.
    Result: whether ``output`` is in the state now (``True`` also when an earlier attempt of
    this very compaction committed), so the caller deletes the output blobs only on ``False``.
    """
    if s.tombstone or not inputs:
        return Apply(None, False)
    n = len(inputs)
    for i in range(len(s.batches) - n + 1):
        if s.batches[i : i + n] == inputs:
            break
    else:
        # Re-run after an indeterminate CaS that committed: the output is already in place.
        done = bool(output.parts) and any(b.parts == output.parts for b in s.batches)
        return Apply(None, done)
    if output.lower != inputs[0].lower or output.upper != inputs[-1].upper:
        raise InvariantViolation(
            f"shard {s.shard_id}: compaction output {output.lower}..{output.upper} does not span "
            f"its inputs {inputs[0].lower}..{inputs[-1].upper}"
        )
    if not output.since.less_equal(s.since):
        raise InvariantViolation(
            f"shard {s.shard_id}: compaction since {output.since} beyond shard since {s.since}"
        )
    batches = fold_empty((*s.batches[:i], output, *s.batches[i + n :]))
    return Apply(dataclasses.replace(s, batches=batches, last_retire_seqno=s.seqno + 1), True)


def finalize(s: ShardState) -> Apply[None]:
    """Turn a shard with ``since == upper == {}`` into a tombstone (its data is then deleted)."""
    if s.tombstone:
        return Apply(None, None)
    if not (s.since.is_empty() and s.upper.is_empty()):
        raise NotFinalizable(str(s.shard_id), s.since, s.upper)
    return Apply(
        dataclasses.replace(
            s,
            batches=(),
            writers={},
            leased_readers={},
            critical_readers={},
            tombstone=True,
            last_retire_seqno=s.seqno + 1,
        ),
        None,
    )
