"""Finalizing the shards of dropped collections.

A dropped collection's shard is first recorded in the durable *unfinalized* set (in the same
metadata update that forgets the collection), then finalized:

1. claim the controller's critical since handle with this controller's epoch (fencing) and
   downgrade it to ``{}``;
2. close the shard: append an empty batch moving the upper to ``{}`` (retrying on a moved
   upper) unless it is already ``{}``;
3. ``finalize_shard``: with since and upper both ``{}`` the shard becomes a tombstone and its
   data is deleted;

and only then removed from the unfinalized set. Leased readers of other processes (a replica
that still reads it) keep the since until they expire; such a shard stays unfinalized and is
retried (``reconcile_state`` on boot, and every maintenance pass).
"""

from __future__ import annotations

import logging
from typing import Final

from spate.frontier.antichain import Antichain
from spate.ids import IdGen, ShardId
from spate.persist.client import PersistClient
from spate.persist.error_shard import errors_shard
from spate.persist.errors import Fenced, NotFinalizable
from spate.persist.state import UpperMismatch
from spate.repr.desc import RelationDesc
from spate.storage.controller.errors import ControllerFenced

_log: Final = logging.getLogger("spate.storage.finalization")


def finalize_shard(persist: PersistClient, shard: ShardId, *, epoch: int, ids: IdGen) -> bool:
    """Finalize ``shard`` (see the module docs), and its errors shard if it has one
    (:mod:`spate.persist.error_shard`); ``True`` once both are tombstones.

    ``False`` when it cannot be finalized yet (another reader still holds its since). Raises
    ``ControllerFenced`` when a newer controller owns the critical since.
    """
    eshard = errors_shard(shard)
    if persist.fetch_state(eshard).seqno > 0 and not _finalize(persist, eshard, epoch, ids):
        return False
    return _finalize(persist, shard, epoch, ids)


def _finalize(persist: PersistClient, shard: ShardId, epoch: int, ids: IdGen) -> bool:
    state = persist.fetch_state(shard)
    if state.tombstone:
        return True
    try:
        since = persist.open_critical_since(shard, epoch=epoch)
        since.downgrade_since(Antichain.empty())
    except Fenced as e:
        raise ControllerFenced(epoch, e.current_epoch, f"finalizing shard {shard}") from None
    if not persist.fetch_state(shard).upper.is_empty():
        desc = state.desc if state.desc is not None else RelationDesc([])
        writer = persist.open_writer(shard, desc)
        try:
            upper = writer.fetch_recent_upper()
            while not upper.is_empty():
                result = writer.compare_and_append(
                    None,
                    expected_upper=upper,
                    new_upper=Antichain.empty(),
                    idempotency_token=ids.uuid(),
                )
                upper = result.current if isinstance(result, UpperMismatch) else Antichain.empty()
        finally:
            try:
                writer.expire()
            except Exception:
                _log.debug("finalization: expiring the writer of %s failed", shard, exc_info=True)
    try:
        persist.finalize_shard(shard)
    except NotFinalizable as e:
        _log.info("shard %s cannot be finalized yet: %s", shard, e)
        return False
    return True
