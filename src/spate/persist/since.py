"""``SinceHandle``: a critical reader and controller fencing by epoch.

A critical reader is not leased and never expires: it holds the shard's since until it is
explicitly downgraded (to ``{}`` to release it). Its id must be durable — controllers use the
fixed :data:`~spate.ids.CONTROLLER_CRITICAL_SINCE` — or the since leaks.

``compare_and_downgrade_since(expected_opaque, new_opaque, new_since)``: if the stored opaque is
``expected_opaque``, store ``new_opaque`` and move the since to ``max(old, new_since)`` (never
back); otherwise return :class:`OpaqueMismatch` with the stored opaque (a value, nothing
changed).

**Fencing.** Controllers use the opaque as their epoch. A handle opened with ``epoch=e`` claims
the reader on open: if the stored epoch is above ``e`` it raises ``Fenced``; otherwise it moves
the opaque to ``e``. Afterwards :meth:`SinceHandle.downgrade_since` compares against ``e`` on
every call and raises ``Fenced(epoch=e, current_epoch=…)`` once a newer controller claimed the
reader — so an older controller can never move a since after a newer one took over (P6).
"""

from __future__ import annotations

import threading

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import CriticalReaderId, ShardId
from spate.persist._shard import ShardContext
from spate.persist.errors import Fenced
from spate.persist.gc import should_gc
from spate.persist.state import (
    OpaqueMismatch,
    SinceDowngraded,
    compare_and_downgrade_since,
    register_critical_reader,
)

__all__ = ["OpaqueMismatch", "SinceDowngraded", "SinceHandle"]


class SinceHandle:
    """A critical reader of one shard. Open with ``PersistClient.open_critical_since``."""

    def __init__(
        self,
        ctx: ShardContext,
        reader_id: CriticalReaderId,
        *,
        since: Frontier,
        opaque: int,
        epoch: int | None,
    ) -> None:
        self._ctx = ctx
        self.reader_id = reader_id
        self._since = since
        self._opaque = opaque
        self.epoch = epoch
        self._lock = threading.Lock()

    @property
    def shard_id(self) -> ShardId:
        return self._ctx.shard_id

    @property
    def since(self) -> Frontier:
        """The since as of this handle's last operation."""
        return self._since

    @property
    def opaque(self) -> int:
        """The opaque token as of this handle's last operation."""
        return self._opaque

    def compare_and_downgrade_since(
        self, expected_opaque: int, new_opaque: int, new_since: Frontier
    ) -> SinceDowngraded | OpaqueMismatch:
        """See the module docs."""
        for name, v in (("expected_opaque", expected_opaque), ("new_opaque", new_opaque)):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**63:
                raise TypeError(f"{name} must be an int in [0, 2**63), got {v!r}")
        if not isinstance(new_since, Antichain) or len(new_since) > 1:
            raise TypeError(f"new_since must be a frontier of at most one time, got {new_since!r}")
        ctx = self._ctx
        with self._lock:
            applied = ctx.machine.apply(
                lambda s: compare_and_downgrade_since(
                    s,
                    self.reader_id,
                    expected_opaque=expected_opaque,
                    new_opaque=new_opaque,
                    new_since=new_since,
                )
            )
            result = applied.result
            if isinstance(result, SinceDowngraded):
                self._since, self._opaque = result.since, result.opaque
            else:
                self._since, self._opaque = result.since, result.current
            if (
                applied.changed
                and ctx.config.maintenance
                and should_gc(
                    applied.before, applied.state, ctx.machine.changes_since_gc, ctx.config.gc_every
                )
            ):
                from spate.persist.maintenance import run_maintenance

                run_maintenance(ctx, applied.before, writer=None, schema=None)
            return result

    def downgrade_since(self, new_since: Frontier) -> Frontier:
        """Downgrade as the controller at ``epoch`` (the handle must be opened with one).

        Raises ``Fenced`` if a newer epoch claimed this reader.
        """
        if self.epoch is None:
            raise TypeError("downgrade_since needs a handle opened with epoch=…")
        result = self.compare_and_downgrade_since(self.epoch, self.epoch, new_since)
        if isinstance(result, OpaqueMismatch):
            raise Fenced(str(self.shard_id), str(self.reader_id), self.epoch, result.current)
        return result.since

    def fetch(self) -> Frontier:
        """Refresh since and opaque from Consensus; return the since."""
        state = self._ctx.machine.fetch()
        st = state.critical_readers.get(self.reader_id)
        if st is not None:
            self._since, self._opaque = st.since, st.opaque
        else:
            self._since = state.since
        return self._since

    def __repr__(self) -> str:
        return (
            f"SinceHandle(shard={self.shard_id}, reader={self.reader_id}, since={self._since}, "
            f"opaque={self._opaque})"
        )


def open_since_handle(
    ctx: ShardContext, reader_id: CriticalReaderId, *, epoch: int | None
) -> SinceHandle:
    """Register (if needed) and, with ``epoch``, claim the critical reader (see module docs)."""
    if epoch is not None and (
        isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 < epoch < 2**63
    ):
        raise TypeError(f"epoch must be a positive int, got {epoch!r}")
    applied = ctx.machine.apply(lambda s: register_critical_reader(s, reader_id))
    st = applied.result
    handle = SinceHandle(ctx, reader_id, since=st.since, opaque=st.opaque, epoch=epoch)
    if epoch is None:
        return handle
    while True:
        current = handle.opaque
        if current > epoch:
            raise Fenced(str(ctx.shard_id), str(reader_id), epoch, current)
        result = handle.compare_and_downgrade_since(current, epoch, handle.since)
        if isinstance(result, SinceDowngraded):
            return handle
