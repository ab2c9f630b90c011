"""Persist: durable shards of updates on Blob (Parquet batches) + Consensus (shard state).

Usage (blocking calls; from asyncio use ``asyncio.to_thread`` or the ``…_async`` helpers)::

    location = PersistLocation.embedded(data_dir)
    client = PersistClient(location, clock=SystemClock(), ids=SystemIdGen())
    w = client.open_writer(shard_id, desc)                 # registers a leased writer
    res = w.compare_and_append(table, expected_upper=Antichain.of(0),
                               new_upper=Antichain.of(1), idempotency_token=ids.uuid())
    match res:
        case Appended(upper=u): ...                        # committed (maybe by an earlier retry)
        case UpperMismatch(current=c): ...                 # someone else won; nothing written
    r = client.open_leased_reader(shard_id, desc)          # since held at the shard's since
    r.snapshot(as_of, timeout=5.0)                         # consolidated contents at as_of
    async for event in r.listen(as_of): ...                # ListenUpdates / ListenProgress
    df = spark_snapshot(spark, r, as_of)                   # spate.persist.spark
    since = client.open_critical_since(shard_id, epoch=controller_epoch)
    since.downgrade_since(Antichain.of(t))                 # Fenced once a newer epoch claims it

Obligations: ``table`` has ``spate.repr.arrow.updates_schema(desc)``; retry an
``Indeterminate`` append with the *same* token; heartbeat (or write / downgrade) leased handles
more often than their lease (15 min by default) and ``expire()`` them on shutdown; files from
``live_batches``/``spark_snapshot`` stay valid until the reader's next ``downgrade_since``,
``heartbeat`` or ``expire``.

Modules: :mod:`~spate.persist.location` (stores, ``PersistLocation``), :mod:`~spate.persist.state`
(shard state, pure transitions, invariants), :mod:`~spate.persist.machine` (CaS loop),
:mod:`~spate.persist.write`, :mod:`~spate.persist.read`, :mod:`~spate.persist.since` (handles),
:mod:`~spate.persist.compact`, :mod:`~spate.persist.gc`, :mod:`~spate.persist.client`.
"""

from __future__ import annotations

from spate.persist.client import PersistClient
from spate.persist.config import PersistConfig
from spate.persist.errors import (
    AsOfBeforeSince,
    BatchMissing,
    BatchNotFromThisShard,
    CorruptBatch,
    Fenced,
    InvalidAppend,
    InvalidBounds,
    InvalidLocation,
    LeaseExpired,
    ListenCompactedPast,
    NotFinalizable,
    UpdateBeyondUpper,
    UpdateNotBeyondLower,
    UpperTimeout,
)
from spate.persist.location import Blob, Consensus, PersistLocation, VersionedData
from spate.persist.read import ListenEvent, ListenProgress, ListenUpdates, LiveBatches, ReadHandle
from spate.persist.since import SinceHandle
from spate.persist.state import Appended, OpaqueMismatch, SinceDowngraded, UpperMismatch
from spate.persist.write import WriteHandle

__all__ = [
    "Appended",
    "AsOfBeforeSince",
    "BatchMissing",
    "BatchNotFromThisShard",
    "Blob",
    "Consensus",
    "CorruptBatch",
    "Fenced",
    "InvalidAppend",
    "InvalidBounds",
    "InvalidLocation",
    "LeaseExpired",
    "ListenCompactedPast",
    "ListenEvent",
    "ListenProgress",
    "ListenUpdates",
    "LiveBatches",
    "NotFinalizable",
    "OpaqueMismatch",
    "PersistClient",
    "PersistConfig",
    "PersistLocation",
    "ReadHandle",
    "SinceDowngraded",
    "SinceHandle",
    "UpdateBeyondUpper",
    "UpdateNotBeyondLower",
    "UpperMismatch",
    "UpperTimeout",
    "VersionedData",
    "WriteHandle",
]
