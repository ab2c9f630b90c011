"""Persist's narrow errors.

Usage errors (a caller bug; never retried; the failed call changed nothing) subclass
:class:`~spate.errors.UsageError`. Failures of Blob or Consensus are
:class:`~spate.errors.Determinate` (certainly no effect) or :class:`~spate.errors.Indeterminate`
(may or may not have taken effect). Expected outcomes — an upper that moved, an opaque token that
changed — are returned values (:class:`~spate.persist.write.UpperMismatch`,
:class:`~spate.persist.read.OpaqueMismatch`), never these exceptions.

Every message names the shard (or blob key) and the frontiers involved.
"""

from __future__ import annotations

from spate.errors import SpateError, UsageError
from spate.errors import UpdateBeyondUpper as UpdateBeyondUpper
from spate.errors import UpdateNotBeyondLower as UpdateNotBeyondLower
from spate.frontier.antichain import Antichain


class InvalidLocation(UsageError, ValueError):
    """A blob or consensus URI that spate cannot open."""

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        super().__init__(f"invalid persist location {uri!r}: {reason}")


class InvalidKey(UsageError, ValueError):
    """A blob key or consensus key with characters or a shape that is not allowed."""


class TruncateBeyondHead(UsageError, ValueError):
    """``Consensus.truncate(key, seqno)`` with ``seqno`` beyond the head (or a missing key)."""

    def __init__(self, key: str, seqno: int, head: int | None) -> None:
        self.key, self.seqno, self.head = key, seqno, head
        super().__init__(
            f"consensus key {key}: cannot truncate before seqno {seqno}: head is {head}"
        )


class InvalidBounds(UsageError, ValueError):
    """A write whose ``new_upper`` is less than its ``expected_upper`` (``lower``)."""

    def __init__(self, shard: str, lower: Antichain[int], upper: Antichain[int]) -> None:
        self.shard, self.lower, self.upper = shard, lower, upper
        super().__init__(f"shard {shard}: invalid bounds: lower {lower} is not <= upper {upper}")


class InvalidAppend(UsageError, ValueError):
    """An ``append`` or retried ``compare_and_append`` that can never succeed as asked."""


class AsOfBeforeSince(UsageError, ValueError):
    """A read at a time that is not at or beyond the since (persist's ``Since`` error)."""

    sqlstate = "55000"

    def __init__(self, shard: str, as_of: int, since: Antichain[int]) -> None:
        self.shard, self.as_of, self.since = shard, as_of, since
        super().__init__(f"shard {shard}: read as of {as_of} is not beyond its since {since}")


class UpperTimeout(SpateError, TimeoutError):
    """A read waited ``timeout`` seconds and the upper did not pass ``as_of``."""

    def __init__(self, shard: str, as_of: int, upper: Antichain[int], timeout: float) -> None:
        self.shard, self.as_of, self.upper = shard, as_of, upper
        super().__init__(f"shard {shard}: upper {upper} did not pass {as_of} within {timeout:.3g}s")


class ListenCompactedPast(SpateError):
    """A listen found a batch whose times were advanced past the listen's frontier.

    The listen's reader let its since move to or beyond the frontier the listen still had to
    read (or its lease expired): the updates can no longer be reported at their own times.
    """

    def __init__(self, shard: str, frontier: Antichain[int], batch_since: Antichain[int]) -> None:
        self.shard, self.frontier, self.batch_since = shard, frontier, batch_since
        super().__init__(
            f"shard {shard}: listen at frontier {frontier} found a batch compacted to since "
            f"{batch_since}; keep the reader's since below the listen's frontier"
        )


class LeaseExpired(SpateError):
    """A leased handle (writer or reader) was expired from the shard; it must not be used."""

    def __init__(self, shard: str, handle: str) -> None:
        self.shard, self.handle = shard, handle
        super().__init__(
            f"shard {shard}: {handle} is no longer registered (its lease expired or it was "
            f"expired); open a new handle"
        )


class Fenced(SpateError):
    """A critical since handle was fenced by a newer epoch (another controller took over)."""

    def __init__(self, shard: str, reader: str, epoch: int, current_epoch: int) -> None:
        self.shard, self.reader = shard, reader
        self.epoch, self.current_epoch = epoch, current_epoch
        super().__init__(
            f"shard {shard}: critical reader {reader} at epoch {epoch} is fenced by epoch "
            f"{current_epoch}"
        )


class NotFinalizable(UsageError, ValueError):
    """``finalize_shard`` on a shard whose since or upper is not yet empty."""

    def __init__(self, shard: str, since: Antichain[int], upper: Antichain[int]) -> None:
        self.shard, self.since, self.upper = shard, since, upper
        super().__init__(
            f"shard {shard}: cannot finalize: since {since} and upper {upper} must both be {{}}"
        )


class CorruptBatch(SpateError):
    """A batch blob that is missing, truncated, altered or foreign. Its rows are never served."""

    def __init__(self, key: str, reason: str) -> None:
        self.key, self.reason = key, reason
        super().__init__(f"corrupt batch {key}: {reason}")


class BatchMissing(CorruptBatch):
    """A batch referenced by the shard state is absent from the blob store."""

    def __init__(self, key: str) -> None:
        super().__init__(key, "the blob is missing")


class BatchNotFromThisShard(CorruptBatch):
    """A batch blob written for another shard was found under this shard's key."""

    def __init__(self, key: str, expected: str, found: str) -> None:
        self.expected, self.found = expected, found
        super().__init__(key, f"written for shard {found}, not {expected}")
