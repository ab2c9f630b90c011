"""Creating and dropping catalog objects, and restoring them at open.

Each operation validates against the catalog before any side effect, then creates what the
controllers need (storage collections first, so a crash never leaves a catalog entry without
its shard; an orphaned shard is finalized at the next open), commits the catalog, and finally
installs dataflows. Drops commit the catalog first and then release controller state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from spate.environment import subscriptions
from spate.environment.builtins import IntrospectionItem
from spate.environment.catalog import (
    CatalogState,
    CheckConstraint,
    Constraint,
    HasDependents,
    IndexItem,
    Item,
    MaterializedViewItem,
    SinkItem,
    SourceItem,
    StoredItem,
    SubsourceItem,
    TableItem,
    UniqueConstraint,
    UnknownName,
    ViewItem,
    item_desc,
    kind_of,
)
from spate.environment.clusters import cluster_for, ensure_storage_replica
from spate.environment.definitions import SqlDefinition
from spate.environment.planning import (
    choose_as_of,
    index_dataflow,
    inline_views,
    materialized_view_dataflow,
    storage_inputs,
)
from spate.environment.runtime import STORAGE_INSTANCE, Runtime
from spate.errors import (
    InputMissing,
    InvalidArgumentValue,
    UniqueViolation,
    UsageError,
    check_argument,
)
from spate.errors import InvalidObject as InvalidObject
from spate.frontier.antichain import Antichain
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId
from spate.plan.builder import ColumnSpec, position
from spate.plan.relation import Get, RelationExpr
from spate.protocol.kafka import KafkaSinkConnection, KafkaSource
from spate.protocol.mysql import MySqlSource
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import (
    FileFormat,
    FileSource,
    LoadGeneratorSource,
    ParquetSinkConnection,
    PostgresSinkConnection,
    PostgresSource,
    SinkConnection,
    SourceConnection,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.storage.controller.table_contents import TableContents
from spate.storage.controller.types import (
    CollectionDescription,
    ExportDescription,
    IngestionExport,
    IngestionSource,
    OtherSource,
    TableSource,
)
from spate.storage.secrets import referenced
from spate.storage.sources.open import load_generator, progress_desc

_log: Final = logging.getLogger("spate.environment")

MAX_RETAIN_HISTORY_MS: Final = 2**53
"""Longer than any real history (about 285,000 years), small enough for every encoding."""


def lag_policy(ms: int) -> ReadPolicy:
    return ReadPolicy.lag_writes_by(ms, max(ms, 1))


def with_id(
    state: CatalogState, item: StoredItem, sql: SqlDefinition | None = None
) -> CatalogState:
    """Add ``item`` (whose id was allocated earlier), with its SQL ``sql`` if it was made in
    SQL, and keep the id counter beyond it."""
    return state.add_item(item, sql).ids_beyond(item.id)


def check_plan(rt: Runtime, plan: RelationExpr) -> None:
    """Every ``Get`` reads a readable catalog object, with that object's schema."""
    for node in plan.walk():
        if not isinstance(node, Get):
            continue
        try:
            item = rt.catalog.by_id(node.id)
        except UnknownName:
            raise InputMissing(node.id) from None
        desc = item_desc(item)
        if desc is None or isinstance(item, IndexItem):
            raise InvalidObject(
                f"the plan reads {kind_of(item)} {item.name}, which is not readable"
            )
        if desc != node.relation:
            raise InvalidObject(
                f"the plan reads {item.name} as {node.relation}, but {item.name} is {desc}"
            )


def _storage_since_upper(
    rt: Runtime, ids: Sequence[GlobalId]
) -> tuple[list[Antichain[int]], list[Antichain[int]]]:
    """The inputs' sinces and uppers, as the storage controller knows them (a table's upper
    includes its last committed write)."""
    fs = [rt.storage.collection_frontiers(i) for i in ids]
    return [f.since for f in fs], [f.upper for f in fs]


# --- tables and views -------------------------------------------------------------------------


async def create_table(
    rt: Runtime,
    name: str,
    desc: RelationDesc,
    constraints: Sequence[Constraint] = (),
    sql: SqlDefinition | None = None,
    *,
    webhook: bool = False,
) -> GlobalId:
    """A new table; with ``webhook``, a webhook source (``TableItem.webhook``)."""
    check_argument(name, str, "a table name")
    check_argument(desc, RelationDesc, f"the description of table {name!r}")
    desc = _constrained(name, desc, constraints)
    state, id = rt.catalog.allocate_id()
    item = TableItem(name, id, desc, constraints=tuple(constraints), webhook=webhook)
    state.add_item(item, sql)
    await rt.storage.create_collections([(id, CollectionDescription(desc, TableSource()))])
    rt.commit(lambda s: with_id(s, item, sql))
    rt.storage.set_read_policy([(id, lag_policy(item.retain_history_ms))])
    return id


def _constrained(name: str, desc: RelationDesc, constraints: Sequence[Constraint]) -> RelationDesc:
    """``desc`` with a primary key's columns NOT NULL, once ``constraints`` are checked: known
    columns, unique names, at most one primary key."""
    names: set[str] = set()
    primary = [c for c in constraints if isinstance(c, UniqueConstraint) and c.primary]
    if len(primary) > 1:
        raise InvalidObject(f"multiple primary keys for table {name!r} are not allowed")
    for c in constraints:
        check_argument(c, (UniqueConstraint, CheckConstraint), f"a constraint of table {name!r}")
        if c.name in names:
            raise InvalidObject(f'constraint "{c.name}" for relation "{name}" already exists')
        names.add(c.name)
        if isinstance(c, UniqueConstraint):
            if not c.columns:
                raise InvalidObject(f"constraint {c.name!r} of table {name!r} has no columns")
            for col in c.columns:
                if col not in desc.names:
                    raise InvalidObject(
                        f'column "{col}" named in key does not exist (constraint {c.name!r})'
                    )
    if not primary:
        return desc
    key = set(primary[0].columns)
    return RelationDesc(
        dataclasses.replace(col, nullable=False) if col.name in key else col for col in desc.columns
    )


async def create_view(
    rt: Runtime, name: str, plan: RelationExpr, sql: SqlDefinition | None = None
) -> GlobalId:
    check_argument(name, str, "a view name")
    check_argument(plan, RelationExpr, f"the plan of view {name!r}")
    check_plan(rt, plan)
    _, id = rt.catalog.allocate_id()
    item = ViewItem(name, id, plan)
    rt.commit(lambda s: with_id(s, item, sql))
    return id


# --- materialized views and indexes -----------------------------------------------------------


def _install_materialized_view(rt: Runtime, item: MaterializedViewItem, as_of: int) -> None:
    plan = inline_views(item.plan, rt.catalog)
    df = materialized_view_dataflow(item, plan, rt.catalog, as_of)
    instance = rt.instance_of(item.cluster)
    rt.compute.create_dataflow(instance, df)
    rt.compute.allow_writes(instance, item.id)


async def create_materialized_view(
    rt: Runtime,
    name: str,
    plan: RelationExpr,
    cluster: str | None,
    sql: SqlDefinition | None = None,
) -> GlobalId:
    check_argument(name, str, "a materialized view name")
    check_argument(plan, RelationExpr, f"the plan of materialized view {name!r}")
    if cluster is not None:
        check_argument(cluster, str, f"the cluster of materialized view {name!r}")
    check_plan(rt, plan)
    cluster_name = await cluster_for(rt, cluster)
    inlined = inline_views(plan, rt.catalog)
    state, id = rt.catalog.allocate_id()
    item = MaterializedViewItem(name, id, plan, cluster_name)
    state.add_item(item, sql)
    inputs = storage_inputs(inlined)
    # Hold the inputs from choosing the as_of until the dataflow holds them itself: creating
    # the view's collection awaits, and meanwhile their read policies may compact them.
    holds = rt.storage.acquire_read_holds(inputs)
    try:
        _, uppers = _storage_since_upper(rt, inputs)
        as_of = choose_as_of([h.since for h in holds], uppers)
        materialized_view_dataflow(item, inlined, rt.catalog, as_of).validate()
        description = CollectionDescription(inlined.desc, OtherSource(), since=Antichain.of(as_of))
        await rt.storage.create_collections([(id, description)])
        rt.commit(lambda s: with_id(s, item, sql))
        rt.storage.set_read_policy([(id, lag_policy(item.retain_history_ms))])
        _install_materialized_view(rt, item, as_of)
    finally:
        for hold in holds:
            hold.release()
    return id


def _index_as_of(rt: Runtime, item: IndexItem) -> int:
    on = rt.catalog.by_id(item.on)
    plan = inline_views(on.plan, rt.catalog) if isinstance(on, ViewItem) else None
    ids = storage_inputs(plan) if plan is not None else [item.on]
    sinces, uppers = _storage_since_upper(rt, ids)
    return choose_as_of(sinces, uppers)


def _install_index(rt: Runtime, item: IndexItem, as_of: int) -> None:
    df, _ = index_dataflow(item, rt.catalog, as_of)
    instance = rt.instance_of(item.cluster)
    rt.compute.create_dataflow(instance, df)
    rt.compute.set_read_policy(instance, [(item.id, lag_policy(item.retain_history_ms))])


async def create_index(
    rt: Runtime,
    name: str,
    on: str,
    key: Sequence[ColumnSpec],
    cluster: str | None,
    sql: SqlDefinition | None = None,
) -> GlobalId:
    check_argument(name, str, "an index name")
    check_argument(on, str, f"what index {name!r} is on")
    check_argument(key, (list, tuple), f"the key of index {name!r}")
    if cluster is not None:
        check_argument(cluster, str, f"the cluster of index {name!r}")
    target = rt.catalog.get(on)
    desc = item_desc(target)
    if desc is None or isinstance(target, IndexItem):
        raise InvalidObject(f"cannot index {kind_of(target)} {on}")
    if cluster is None and isinstance(target, MaterializedViewItem):
        cluster = target.cluster
    positions = tuple(position(desc, k, "index key column") for k in key)
    cluster_name = await cluster_for(rt, cluster)
    state, id = rt.catalog.allocate_id()
    item = IndexItem(name, id, target.id, positions, cluster_name)
    state.add_item(item, sql)
    as_of = _index_as_of(rt, item)
    index_dataflow(item, rt.catalog, as_of)[0].validate()
    rt.commit(lambda s: with_id(s, item, sql))
    _install_index(rt, item, as_of)
    return id


# --- sources and sinks ------------------------------------------------------------------------


def _source_outputs(
    connection: SourceConnection, tables: Sequence[str] | None, desc: RelationDesc | None
) -> dict[str, RelationDesc]:
    if isinstance(connection, LoadGeneratorSource):
        outputs = load_generator(connection).outputs
        return {ref: outputs[ref] for ref in connection.references()}
    if isinstance(connection, PostgresSource):
        from spate.storage.sources.postgres.catalog import describe_source

        described = describe_source(
            connection.connection.reveal(),
            publication=connection.publication,
            slot=connection.slot,
            tables=tables,
        )
        return described.outputs()
    if isinstance(connection, FileSource):
        if desc is None:
            raise InvalidObject("a file source needs desc=: the schema of its files")
        check_argument(connection.directory, str, "a file source's directory")
        check_argument(connection.format, FileFormat, "a file source's format")
        if not Path(connection.directory).is_dir():
            raise InvalidObject(
                f"a file source reads a directory; {connection.directory!r} is not one"
            )
        return {"files": desc}
    if isinstance(connection, KafkaSource):
        from spate.storage.sources.kafka.envelope import outputs as kafka_outputs

        return kafka_outputs(connection)
    if isinstance(connection, MySqlSource):
        from spate.storage.sources.mysql.catalog import describe_source as describe_mysql
        from spate.storage.sources.mysql.catalog import settings_of, source_outputs

        assert isinstance(connection.connection, Secret)
        tables_of = describe_mysql(settings_of(connection.connection.reveal()), tables)
        return source_outputs(tables_of)
    raise InvalidObject(f"unknown source connection {type(connection).__name__}")


async def create_source(
    rt: Runtime,
    name: str,
    connection: SourceConnection,
    *,
    tables: Sequence[str] | None = None,
    desc: RelationDesc | None = None,
    names: Mapping[str, str] | None = None,
    sql: SqlDefinition | None = None,
) -> dict[str, GlobalId]:
    """Create source ``name`` and one subsource per output (``<name>_<output>``); ``sql``
    is the source's (its subsources have none).

    A load generator without a ``base_time_ms`` starts its event times at the source's
    creation, so that event-time columns line up with ``now()``.
    """
    check_argument(name, str, "a source name")
    check_argument(
        connection,
        (LoadGeneratorSource, PostgresSource, FileSource, KafkaSource, MySqlSource),
        f"source {name!r}",
    )
    if desc is not None:
        check_argument(desc, RelationDesc, f"the description of source {name!r}")
        if not isinstance(connection, FileSource):
            raise InvalidArgumentValue(
                f"source {name!r}: desc= describes the files of a file source; "
                f"a {type(connection).__name__} has its own columns"
            )
    if tables is not None:
        check_argument(tables, (list, tuple), f"the tables of source {name!r}")
        for t in tables:
            check_argument(t, str, f"a table of source {name!r}")
        if not isinstance(connection, (PostgresSource, MySqlSource)):
            raise InvalidArgumentValue(
                f"source {name!r}: tables= picks tables of a PostgreSQL publication or a "
                f"MySQL server; "
                f"a {type(connection).__name__} has none"
            )
    if names is not None:
        check_argument(names, dict, f"the subsource names of source {name!r} (output: name)")
        for output, sub in names.items():
            check_argument(output, str, f"an output of source {name!r}")
            check_argument(sub, str, f"the subsource name for output {output!r}")
    if isinstance(connection, LoadGeneratorSource) and connection.base_time_ms is None:
        connection = dataclasses.replace(connection, base_time_ms=rt.clock.now_millis())
    secrets = rt.layout.secrets()
    outputs = await asyncio.to_thread(_source_outputs, secrets.resolve(connection), tables, desc)
    unknown = sorted(set(names or {}) - set(outputs))
    if unknown:
        raise InvalidArgumentValue(
            f"source {name!r} has no output {', '.join(map(repr, unknown))} to name; its "
            f"outputs: {', '.join(outputs)}"
        )
    # From here on only a reference to the secret: the catalog and the storage controller's
    # metadata live in consensus (:mod:`spate.storage.secrets`).
    stored = secrets.externalize(connection)
    try:
        return await _create_source(rt, name, stored, outputs, names, sql)
    except BaseException:
        if stored is not connection:  # stored by this call: a failed call leaves nothing
            _forget_secret(rt, stored)
        raise


async def _create_source(
    rt: Runtime,
    name: str,
    connection: SourceConnection,
    outputs: dict[str, RelationDesc],
    names: Mapping[str, str] | None,
    sql: SqlDefinition | None,
) -> dict[str, GlobalId]:
    state, source_id = rt.catalog.allocate_id()
    items: list[StoredItem] = [SourceItem(name, source_id, connection, progress_desc(connection))]
    exports: dict[GlobalId, str] = {}
    for ref, out_desc in outputs.items():
        state, sub_id = state.allocate_id()
        sub_name = (names or {}).get(ref, f"{name}_{ref.split('.')[-1]}")
        items.append(SubsourceItem(sub_name, sub_id, source_id, ref, out_desc))
        exports[sub_id] = ref
    check = rt.catalog
    for it in items:
        check = with_id(check, it, sql if it.id == source_id else None)
    await ensure_storage_replica(rt)
    ingestion = IngestionSource(STORAGE_INSTANCE, connection, exports)
    collections = [(source_id, CollectionDescription(progress_desc(connection), ingestion))]
    for it in items[1:]:
        assert isinstance(it, SubsourceItem)
        collections.append(
            (it.id, CollectionDescription(it.desc, IngestionExport(source_id, it.reference)))
        )
    # Created at the current read timestamp: what the source finds first (a PostgreSQL
    # snapshot, the files present) is bound there, so every read from now on sees it.
    await rt.storage.create_collections(collections, register_ts=rt.oracle.read_ts())

    def add_all(s: CatalogState) -> CatalogState:
        for it in items:
            s = with_id(s, it, sql if it.id == source_id else None)
        return s

    rt.commit(add_all)
    rt.storage.set_read_policy([(it.id, lag_policy(1_000)) for it in items])
    return {it.name: it.id for it in items}


async def create_sink(
    rt: Runtime,
    name: str,
    from_: str,
    connection: SinkConnection,
    sql: SqlDefinition | None = None,
) -> GlobalId:
    check_argument(name, str, "a sink name")
    check_argument(from_, str, f"what sink {name!r} reads")
    check_argument(
        connection,
        (ParquetSinkConnection, PostgresSinkConnection, KafkaSinkConnection),
        f"sink {name!r}",
    )
    source = rt.catalog.get(from_)
    if not isinstance(source, (TableItem, SubsourceItem, MaterializedViewItem)):
        raise InvalidObject(
            f"cannot sink {kind_of(source)} {from_}: sinks read tables, sources or "
            "materialized views"
        )
    if isinstance(connection, PostgresSinkConnection):
        await _check_postgres_sink(rt, name, connection, source)
    if isinstance(connection, ParquetSinkConnection):
        check_argument(connection.directory, str, f"the directory of sink {name!r}")
    state, id = rt.catalog.allocate_id()
    stored = rt.layout.secrets().externalize(connection)
    item = SinkItem(name, id, source.id, stored)
    try:
        state.add_item(item, sql)
        await ensure_storage_replica(rt)
        token = rt.storage.prepare_export(id, source.id)
        try:
            await rt.storage.create_exports([(token, ExportDescription(STORAGE_INSTANCE, stored))])
        except BaseException:
            rt.storage.cancel_prepare_export(token)
            raise
        rt.commit(lambda s: with_id(s, item, sql))
    except BaseException:
        if stored is not connection:  # stored by this call: a failed call leaves nothing
            _forget_secret(rt, stored)
        raise
    return id


async def _check_postgres_sink(
    rt: Runtime, name: str, connection: PostgresSinkConnection, source: Item
) -> None:
    """Refuse at once what a running PostgreSQL sink would stall on: bad table names, unknown
    key columns, a server that cannot be reached."""
    from spate.storage.sinks.interval import SinkError
    from spate.storage.sinks.postgres import check_reachable, check_sink

    desc = item_desc(source)
    assert desc is not None
    try:
        check_sink(connection, desc, sink=name)
        resolved = rt.layout.secrets().resolve(connection)
        await asyncio.to_thread(check_reachable, resolved.connection.reveal(), sink=name)
    except SinkError as e:
        raise InvalidObject(str(e)) from None


def _forget_secret(rt: Runtime, connection: object) -> None:
    """Delete the secret ``connection`` references, unless a catalog item still uses it (the
    environment owns the secrets in its directory: :mod:`spate.storage.secrets`)."""
    ref = referenced(connection)
    if ref is None:
        return
    for item in rt.catalog:
        if isinstance(item, (SourceItem, SinkItem)) and referenced(item.connection) == ref:
            return
    rt.layout.secrets().delete(ref)


# --- drop, retain history, restore ------------------------------------------------------------


async def create_unique_index(
    rt: Runtime,
    name: str,
    on: str,
    key: Sequence[str],
    cluster: str | None,
    sql: SqlDefinition | None = None,
) -> GlobalId:
    """An index of table ``on`` by ``key`` that is also its unique constraint ``name``: the
    constraint is in the catalog first (so every later write checks it), then the committer
    checks the rows already there, after every earlier write; duplicates undo both."""
    table = rt.catalog.get(on)
    if not isinstance(table, TableItem):
        raise UsageError(f"{on} is a {kind_of(table)}: only a table takes a unique index")
    columns = tuple(key)
    constraint = UniqueConstraint(name, columns)
    _constrained(on, table.desc, (*table.constraints, constraint))
    id = await create_index(rt, name, on, list(key), cluster, sql)
    rt.commit(lambda s: s.replace_item(_with_constraints(s, table.id, constraint)))

    def check(contents: TableContents) -> list[tuple[Row, int]]:
        for k, n in contents.key_counts(columns).items():
            if n > 1:
                shown = ", ".join(str(v) for v in k)
                raise UniqueViolation(
                    f'could not create unique index "{name}"',
                    constraint=name,
                    detail=f"Key ({', '.join(columns)})=({shown}) is duplicated.",
                )
        return []

    try:
        await rt.commits.write_derived(table.id, check)
    except BaseException:
        await drop(rt, name, cascade=True)
        raise
    return id


def _with_constraints(
    state: CatalogState, table: GlobalId, add: Constraint | None = None, remove: str | None = None
) -> TableItem:
    item = state.by_id(table)
    assert isinstance(item, TableItem)
    kept = tuple(c for c in item.constraints if c.name != remove)
    return dataclasses.replace(item, constraints=(*kept, add) if add is not None else kept)


def _drop_items(state: CatalogState, doomed: Sequence[Item]) -> CatalogState:
    """``state`` without ``doomed``; a unique index among them takes its table's constraint
    (of the index's name) with it."""
    ids = frozenset(i.id for i in doomed)
    state = state.remove_items(ids)
    for victim in doomed:
        if isinstance(victim, IndexItem) and victim.on not in ids:
            table = state.by_id(victim.on)
            if isinstance(table, TableItem) and victim.name in {c.name for c in table.unique}:
                state = state.replace_item(_with_constraints(state, table.id, remove=victim.name))
    return state


def rename(rt: Runtime, name: str, new: str) -> None:
    """Rename ``name`` to ``new`` in one catalog commit; plans read objects by id, so its
    dependents (views, indexes, sinks) and running dataflows keep reading it."""
    check_argument(name, str, "the name to rename")
    check_argument(new, str, f"the new name of {name!r}")
    rt.commit(lambda s: s.rename_item(name, new))


def set_comment(rt: Runtime, name: str, column: str | None, text: str | None) -> None:
    """``COMMENT ON``: ``name``'s comment (or its ``column``'s) set to ``text`` (``None``:
    removed), durably in the catalog; it goes with the object."""
    check_argument(name, str, "the object to comment on")
    if text is not None:
        check_argument(text, str, f"the comment on {name!r}")

    def change(state: CatalogState) -> CatalogState:
        item = state.get(name)
        position = None
        if column is not None:
            desc = item_desc(item)
            if desc is None or column not in desc.names:
                raise InvalidObject(f"{kind_of(item)} {name} has no column {column!r}")
            position = desc.names.index(column)
        return state.set_comment(item.id, position, text)

    rt.commit(change)


async def drop(rt: Runtime, name: str, *, cascade: bool) -> list[str]:
    """Drop ``name`` (and, with ``cascade``, everything that depends on it). Returns the names."""
    check_argument(name, str, "the name to drop")
    check_argument(cascade, bool, "cascade")
    item = rt.catalog.get(name)
    if isinstance(item, IntrospectionItem):
        raise UsageError(f"{name} is a system relation: it cannot be dropped")
    dependents = rt.catalog.transitive_dependents(item.id)
    if isinstance(item, SourceItem):
        # A source's subsources are part of it, not dependents to refuse on.
        own = {d.id for d in dependents if isinstance(d, SubsourceItem) and d.source == item.id}
        others = [d for d in dependents if d.id not in own]
    else:
        others = dependents
    if others and not cascade:
        names = ", ".join(f"{kind_of(d)} {d.name}" for d in others)
        raise HasDependents(
            f"cannot drop {kind_of(item)} {name}: {names} depend(s) on it (use cascade=True)"
        )
    doomed = sorted([item, *dependents], key=lambda i: i.id, reverse=True)
    rt.commit(lambda s: _drop_items(s, doomed))
    subscriptions.end_reading(rt, doomed)
    for victim in doomed:
        _release(rt, victim)
        if isinstance(victim, (SourceItem, SinkItem)):
            _forget_secret(rt, victim.connection)
    return [v.name for v in doomed]


def _release(rt: Runtime, item: Item) -> None:
    try:
        if isinstance(item, IndexItem):
            rt.compute.drop_collections(rt.instance_of(item.cluster), [item.id])
        elif isinstance(item, MaterializedViewItem):
            rt.compute.drop_collections(rt.instance_of(item.cluster), [item.id])
            rt.storage.drop_sources([item.id])
        elif isinstance(item, TableItem):
            rt.storage.drop_tables([item.id])
        elif isinstance(item, (SourceItem, SubsourceItem)):
            rt.storage.drop_sources([item.id])
        elif isinstance(item, SinkItem):
            rt.storage.drop_sinks([item.id])
    except Exception:
        # The catalog no longer has it; whatever is left is finalized at the next open.
        _log.exception("releasing %s %s (%s) failed", kind_of(item), item.name, item.id)


def set_retain_history(rt: Runtime, name: str, ms: int) -> None:
    check_argument(name, str, "the name to retain history of")
    check_argument(ms, int, f"retain history of {name!r} (milliseconds)")
    if not 0 <= ms <= MAX_RETAIN_HISTORY_MS:
        raise InvalidObject(
            f"retain history of {name!r} must be in 0..{MAX_RETAIN_HISTORY_MS} ms, got {ms}"
        )
    item = rt.catalog.get(name)
    if not isinstance(
        item, (TableItem, SourceItem, SubsourceItem, MaterializedViewItem, IndexItem)
    ):
        raise UsageError(f"{kind_of(item)} {name} keeps no history")
    updated = dataclasses.replace(item, retain_history_ms=ms)
    rt.commit(lambda s: s.replace_item(updated))
    if isinstance(updated, IndexItem):
        rt.compute.set_read_policy(rt.instance_of(updated.cluster), [(updated.id, lag_policy(ms))])
    else:
        rt.storage.set_read_policy([(updated.id, lag_policy(ms))])


async def restore(rt: Runtime) -> None:
    """At open: read policies, and the dataflows of every materialized view and index.

    The views' inputs are held at their durable sinces until the views' dataflows hold them:
    the read policies would otherwise move them past a view's upper before its dataflow is
    installed, and the view would resume beyond its shard's upper (its sink corrects the shard
    then, but the times in between keep the contents of before the crash)."""
    views = [i for i in rt.catalog if isinstance(i, MaterializedViewItem)]
    inputs = sorted({g for v in views for g in storage_inputs(inline_views(v.plan, rt.catalog))})
    held = [g for g in inputs if not rt.storage.collection_frontiers(g).since.is_empty()]
    holds = rt.storage.acquire_read_holds(held)
    policies = [
        (i.id, lag_policy(i.retain_history_ms))
        for i in rt.catalog
        if isinstance(i, (TableItem, SourceItem, SubsourceItem, MaterializedViewItem))
    ]
    try:
        rt.storage.set_read_policy(policies)
        for item in sorted(
            (i for i in rt.catalog if isinstance(i, (MaterializedViewItem, IndexItem))),
            key=lambda i: i.id,
        ):
            if isinstance(item, MaterializedViewItem):
                plan = inline_views(item.plan, rt.catalog)
                sinces, _ = _storage_since_upper(rt, storage_inputs(plan))
                mv_upper = rt.storage.collection_frontiers(item.id).upper.as_option()
                if mv_upper is None:
                    continue  # closed for good: nothing left to compute
                # Resume where the view's shard stops: replicas write from its upper on.
                at_least = mv_upper - 1 if mv_upper else 0
                as_of = max(choose_as_of(sinces, [], at_least=0), at_least)
                _install_materialized_view(rt, item, as_of)
            else:
                _install_index(rt, item, _index_as_of(rt, item))
    finally:
        for hold in holds:
            hold.release()
