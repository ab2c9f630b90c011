"""Hypothesis strategies for every protocol message (compute, storage, handshake).

:data:`MESSAGE_STRATEGIES` maps each message class to a strategy; :func:`messages` draws any of
them. The round-trip test checks that every registered protocol type has an entry here, so a
new message cannot ship without one.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, PeekId, ReplicaId, ShardId
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.finishing import ColumnOrder, RowSetFinishing
from spate.plan.relation import Get
from spate.protocol import compute, handshake, storage
from spate.protocol import storage_desc as sd
from spate.protocol.common import Hello
from spate.protocol.kafka import (
    KafkaEnvelope,
    KafkaFormat,
    KafkaSinkConnection,
    KafkaSinkEnvelope,
    KafkaSource,
)
from spate.protocol.mysql import MySqlSource
from spate.protocol.secret import Secret
from spate.repr.arrow import rows_to_table
from spate.repr.desc import RelationDesc
from spate.testing.strategies import relation_descs, rows

S = st.SearchStrategy

# --- ids, frontiers, relations ---------------------------------------------------------------


def global_ids() -> S[GlobalId]:
    return st.builds(GlobalId, st.sampled_from(["s", "u", "t"]), st.integers(0, 2**40))


def shard_ids() -> S[ShardId]:
    return st.uuids(version=4).map(ShardId)


def peek_ids() -> S[PeekId]:
    return st.uuids(version=4).map(PeekId)


def frontiers() -> S[Frontier]:
    """``{}``, ``{0}``, small times and times near ``2**64``."""
    t = st.one_of(st.integers(0, 10_000), st.integers(2**64 - 3, 2**64 - 1))
    return st.one_of(st.just(Antichain.empty()), t.map(Antichain.of))


def names() -> S[str]:
    return st.text(min_size=0, max_size=12)


def sqlstates() -> S[str]:
    return st.text(alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=5, max_size=5)


def small_descs() -> S[RelationDesc]:
    return relation_descs(max_columns=3)


def tables(*, with_times: bool) -> S[pa.Table]:
    """Row sets in the physical format: data columns, plus ``_time`` when asked, and ``_diff``."""

    def build(desc: RelationDesc) -> S[pa.Table]:
        row_lists = st.lists(rows(desc), max_size=5)

        def to_table(rs: list[Any]) -> S[pa.Table]:
            diffs = st.lists(st.integers(1, 5), min_size=len(rs), max_size=len(rs))
            times = st.lists(st.integers(0, 2**40), min_size=len(rs), max_size=len(rs))
            if with_times:
                return st.tuples(times, diffs).map(
                    lambda td: rows_to_table(desc, rs, times=td[0], diffs=td[1])
                )
            return diffs.map(lambda d: _with_diff(rows_to_table(desc, rs), d))

        return row_lists.flatmap(to_table)

    return small_descs().flatmap(build)


def _with_diff(table: pa.Table, diffs: list[int]) -> pa.Table:
    return table.append_column("_diff", pa.array(diffs, type=pa.int64()))


# --- dataflows -------------------------------------------------------------------------------


def dataflows() -> S[DataflowDescription]:
    """Small but complete descriptions: every import, build and export kind."""

    @st.composite
    def build(draw: st.DrawFn) -> DataflowDescription:
        desc = draw(small_descs())
        src, built, index, mv, sub = draw(
            st.lists(global_ids(), min_size=5, max_size=5, unique=True)
        )
        key = (0,)
        imports = (
            SourceImport(
                src,
                desc,
                draw(st.none() | shard_ids()),
                draw(frontiers()),
                draw(st.booleans()),
            ),
        )
        index_imports = draw(
            st.lists(
                st.builds(
                    lambda i, m: IndexImport(i, IndexDesc(src, key), desc, m),
                    global_ids(),
                    st.booleans(),
                ),
                max_size=1,
            )
        )
        sinks = (
            SinkExport(mv, built, desc, MaterializedViewConnection(draw(st.none() | shard_ids()))),
            SinkExport(
                sub,
                built,
                desc,
                SubscribeConnection(),
                with_snapshot=draw(st.booleans()),
                up_to=draw(frontiers()),
            ),
        )
        return DataflowDescription(
            source_imports=imports,
            index_imports=tuple(index_imports),
            objects_to_build=(BuildDesc(built, Get(src, desc)),),
            index_exports=(IndexExport(index, IndexDesc(built, key), desc),),
            sink_exports=tuple(draw(st.lists(st.sampled_from(sinks), max_size=2, unique=True))),
            as_of=draw(frontiers()),
            until=draw(frontiers()),
            debug_name=draw(names()),
        )

    return build()


def finishings() -> S[RowSetFinishing]:
    order = st.builds(ColumnOrder, st.integers(0, 5), st.booleans(), st.none() | st.booleans())
    return st.builds(
        RowSetFinishing,
        st.lists(order, max_size=2).map(tuple),
        st.none() | st.integers(0, 100),
        st.integers(0, 100),
        st.none() | st.lists(st.integers(0, 5), max_size=3).map(tuple),
    )


# --- compute ---------------------------------------------------------------------------------


def _hellos() -> S[Hello]:
    return st.builds(Hello, st.integers(0, 5), st.integers(0, 2**63), st.binary(max_size=32))


def _peeks() -> S[compute.Peek]:
    @st.composite
    def build(draw: st.DrawFn) -> compute.Peek:
        desc = draw(small_descs())
        target = draw(
            st.one_of(
                st.builds(compute.IndexTarget, global_ids()),
                st.builds(compute.PersistTarget, global_ids(), shard_ids(), st.just(desc)),
            )
        )
        keys = draw(st.none() | st.lists(rows(desc), min_size=1, max_size=3).map(tuple))
        return compute.Peek(
            target=target,
            uuid=draw(peek_ids()),
            timestamp=draw(st.integers(0, 2**64 - 1)),
            finishing=draw(finishings()),
            result_desc=desc,
            literal_constraints=keys,
        )

    return build()


def _compute_parameters() -> S[compute.ComputeParameters]:
    opt = st.none() | st.integers(0, 2**40)
    return st.builds(compute.ComputeParameters, opt, opt, opt)


def _subscribe_responses() -> S[compute.SubscribeResponse]:
    batch = st.builds(
        compute.SubscribeBatch,
        frontiers(),
        frontiers(),
        st.none() | tables(with_times=True),
        st.none() | names(),
        st.none() | sqlstates(),
        st.none() | names(),
    )
    dropped = st.builds(compute.SubscribeDroppedAt, frontiers())
    return st.builds(compute.SubscribeResponse, global_ids(), batch | dropped)


def _peek_responses() -> S[compute.PeekResponse]:
    response = st.one_of(
        st.builds(compute.PeekRows, tables(with_times=False)),
        st.builds(compute.PeekError, names(), st.none() | sqlstates(), st.none() | names()),
        st.just(compute.PeekCanceled()),
    )
    return st.builds(compute.PeekResponse, peek_ids(), response)


opt_frontier = st.none() | frontiers()

COMPUTE_STRATEGIES: dict[type, S[Any]] = {
    Hello: _hellos(),
    compute.CreateInstance: st.builds(
        compute.CreateInstance,
        st.builds(compute.InstanceConfig, st.integers(1, 10**6), st.none() | st.integers(0, 10**9)),
    ),
    compute.InitializationComplete: st.just(compute.InitializationComplete()),
    compute.AllowWrites: st.builds(compute.AllowWrites, global_ids()),
    compute.UpdateConfiguration: st.builds(compute.UpdateConfiguration, _compute_parameters()),
    compute.CreateDataflow: st.builds(compute.CreateDataflow, dataflows()),
    compute.Schedule: st.builds(compute.Schedule, global_ids()),
    compute.AllowCompaction: st.builds(compute.AllowCompaction, global_ids(), frontiers()),
    compute.Peek: _peeks(),
    compute.CancelPeek: st.builds(compute.CancelPeek, peek_ids()),
    compute.Frontiers: st.builds(
        compute.Frontiers, global_ids(), opt_frontier, opt_frontier, opt_frontier
    ),
    compute.PeekResponse: _peek_responses(),
    compute.SubscribeResponse: _subscribe_responses(),
    compute.Status: st.builds(compute.Status, names(), st.none() | global_ids()),
    compute.StatisticsUpdates: st.builds(
        compute.StatisticsUpdates,
        st.lists(
            st.builds(compute.DataflowStatistics, global_ids(), *[st.integers(0, 2**40)] * 5),
            max_size=3,
        ).map(tuple),
    ),
}

# --- storage ---------------------------------------------------------------------------------


def source_exports(reference: S[str] | None = None) -> S[sd.SourceExport]:
    return st.builds(
        sd.SourceExport,
        global_ids(),
        names() if reference is None else reference,
        shard_ids(),
        small_descs(),
        st.none() | st.lists(st.integers(0, 2), max_size=2).map(tuple),
    )


def secrets_() -> S[Secret]:
    return st.text(min_size=1, max_size=40).map(Secret)


def load_generators() -> S[sd.LoadGeneratorSource]:
    return st.builds(
        sd.LoadGeneratorSource,
        st.sampled_from(sd.LoadGenerator),
        st.integers(0, 2**63 - 1),
        st.integers(1, 10**6),
        st.integers(0, 10**6),
        st.floats(min_value=1e-4, max_value=100, allow_nan=False),
        st.none() | st.integers(1, 10**6),
        st.none() | st.integers(0, 10**6),
    )


def kafka_sources() -> S[KafkaSource]:
    def build(value_format: KafkaFormat, value_desc: RelationDesc | None) -> S[KafkaSource]:
        return st.builds(
            KafkaSource,
            secrets_(),
            names().filter(bool),
            st.just(value_format),
            st.sampled_from([None, KafkaFormat.TEXT, KafkaFormat.JSON]),
            st.just(KafkaEnvelope.NONE),
            st.sampled_from([(), ("partition", "offset"), ("timestamp", "headers")]),
            st.none(),
            st.none(),
            st.just(value_desc),
            st.lists(st.integers(0, 10**6), max_size=3).map(tuple),
            st.integers(1, 10**6),
        )

    return st.one_of(
        st.sampled_from([KafkaFormat.TEXT, KafkaFormat.BYTES]).flatmap(lambda f: build(f, None)),
        small_descs().flatmap(lambda d: build(KafkaFormat.JSON, d)),
    )


def source_connections() -> S[
    sd.LoadGeneratorSource | sd.PostgresSource | sd.FileSource | KafkaSource | MySqlSource
]:
    return st.one_of(
        kafka_sources(),
        st.builds(MySqlSource, secrets_(), st.integers(1, 2**32 - 1)),
        load_generators(),
        st.builds(sd.PostgresSource, secrets_(), names(), names()),
        st.builds(
            sd.FileSource,
            names(),
            st.sampled_from(sd.FileFormat),
            names(),
            st.booleans(),
            st.integers(1, 10**6),
        ),
    )


def ingestions() -> S[sd.IngestionDescription]:
    @st.composite
    def build(draw: st.DrawFn) -> sd.IngestionDescription:
        connection = draw(source_connections())
        if isinstance(connection, sd.LoadGeneratorSource):
            known = connection.references()
            refs = draw(st.lists(st.sampled_from(known), min_size=1, max_size=3, unique=True))
        else:
            refs = draw(st.lists(names(), min_size=1, max_size=3, unique=True))
        ids = draw(
            st.lists(global_ids(), min_size=len(refs) + 1, max_size=len(refs) + 1, unique=True)
        )
        shards = draw(
            st.lists(shard_ids(), min_size=len(refs) + 1, max_size=len(refs) + 1, unique=True)
        )
        exports = tuple(
            sd.SourceExport(ids[i], ref, shards[i], draw(small_descs()))
            for i, ref in enumerate(refs)
        )
        remap = sd.CollectionMetadata(ids[-1], shards[-1], draw(small_descs()))
        return sd.IngestionDescription(connection, exports, remap, draw(st.integers(1, 10**6)))

    return build()


def sinks() -> S[sd.SinkDescription]:
    def postgres(mode: sd.PostgresSinkMode) -> S[sd.PostgresSinkConnection]:
        keys = st.lists(
            names(), min_size=1 if mode is sd.PostgresSinkMode.UPSERT else 0, max_size=2
        )
        return st.builds(
            sd.PostgresSinkConnection, secrets_(), names(), st.just(mode), keys.map(tuple), names()
        )

    connection = st.one_of(
        st.builds(sd.ParquetSinkConnection, names()),
        st.sampled_from(sd.PostgresSinkMode).flatmap(postgres),
        st.builds(
            KafkaSinkConnection,
            secrets_(),
            names().filter(lambda n: bool(n) and n != "_spate_progress"),
            st.just(KafkaSinkEnvelope.UPSERT),
            st.lists(names(), min_size=1, max_size=2).map(tuple),
        ),
    )
    return st.builds(
        sd.SinkDescription,
        global_ids(),
        shard_ids(),
        small_descs(),
        connection,
        frontiers(),
        st.booleans(),
        frontiers(),
    )


def _storage_parameters() -> S[storage.StorageParameters]:
    opt = st.none() | st.integers(0, 2**40)
    return st.builds(storage.StorageParameters, opt, opt, opt, opt, opt, opt)


def _statistics() -> S[storage.StatisticsUpdates]:
    n = st.integers(0, 2**62)
    source = st.builds(
        storage.SourceStatistics,
        global_ids(),
        st.integers(0, 64),
        n,
        n,
        n,
        n,
        n,
        st.booleans(),
        st.none() | n,
        st.none() | n,
        st.none() | n,
        st.none() | n,
        st.none() | n,
    )
    sink = st.builds(storage.SinkStatistics, global_ids(), st.integers(0, 64), n, n, n, n)
    return st.builds(
        storage.StatisticsUpdates,
        st.lists(source, max_size=3).map(tuple),
        st.lists(sink, max_size=3).map(tuple),
    )


STORAGE_STRATEGIES: dict[type, S[Any]] = {
    storage.InitializationComplete: st.just(storage.InitializationComplete()),
    storage.AllowWrites: st.just(storage.AllowWrites()),
    storage.UpdateConfiguration: st.builds(storage.UpdateConfiguration, _storage_parameters()),
    storage.RunIngestion: st.builds(storage.RunIngestion, global_ids(), ingestions()),
    storage.RunSink: st.builds(storage.RunSink, global_ids(), sinks()),
    storage.AllowCompaction: st.builds(storage.AllowCompaction, global_ids(), frontiers()),
    storage.FrontierUpper: st.builds(storage.FrontierUpper, global_ids(), frontiers()),
    storage.DroppedId: st.builds(storage.DroppedId, global_ids()),
    storage.StatisticsUpdates: _statistics(),
    storage.StatusUpdate: st.builds(
        storage.StatusUpdate,
        global_ids(),
        st.sampled_from(storage.ObjectStatus),
        st.integers(0, 2**63),
        st.none() | names(),
        st.lists(names(), max_size=2).map(tuple),
        st.dictionaries(names(), names(), max_size=2),
        st.none() | st.integers(0, 1000).map(ReplicaId),
    ),
}

# --- handshake -------------------------------------------------------------------------------

_nonce = st.binary(min_size=32, max_size=32)
HANDSHAKE_STRATEGIES: dict[type, S[Any]] = {
    handshake.ClientHello: st.builds(
        handshake.ClientHello,
        st.integers(0, 5),
        names(),
        st.sampled_from(["compute", "storage"]),
        st.integers(0, 2**63),
        _nonce,
    ),
    handshake.ServerHello: st.builds(handshake.ServerHello, st.integers(0, 5), names(), _nonce),
    handshake.ClientProof: st.builds(handshake.ClientProof, st.binary(max_size=32)),
    handshake.ServerVerdict: st.builds(
        handshake.ServerVerdict,
        st.sampled_from(["ok", "auth", "version", "role", "epoch"]),
        names(),
        st.integers(0, 2**63),
        st.binary(max_size=32),
    ),
}

MESSAGE_STRATEGIES: dict[type, S[Any]] = {
    **COMPUTE_STRATEGIES,
    **STORAGE_STRATEGIES,
    **HANDSHAKE_STRATEGIES,
}


def messages() -> S[Any]:
    """Any protocol message (command, response or handshake)."""
    return st.one_of(*MESSAGE_STRATEGIES.values())


def commands(role: str) -> S[Any]:
    """Commands a controller may send on a ``role`` connection."""
    from spate.protocol.connection import COMMANDS

    return st.one_of(*(MESSAGE_STRATEGIES[t] for t in COMMANDS[role]))
