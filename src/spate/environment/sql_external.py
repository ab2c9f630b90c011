"""SQL over the outside world: CREATE and DROP of sources, sinks, secrets and connections, and
the connections their options describe.

Secrets and connections are catalog entries (:mod:`spate.environment.definitions`), each
created or dropped in one catalog commit. A secret's value goes to the secrets directory
before its entry is committed (and is deleted again if the commit fails), and is deleted only
after the entry's removal is committed: a failed statement leaves neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from spate.environment import objects, sql_kafka
from spate.environment.catalog import CatalogState
from spate.environment.definitions import (
    ConnectionEntry,
    SecretEntry,
    SqlDefinition,
    secret_value,
)
from spate.errors import ConnectionInUse, HasDependents
from spate.protocol.mysql import MySqlSource, mysql_connection_settings
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import (
    FileFormat,
    FileSource,
    LoadGenerator,
    LoadGeneratorSource,
    ParquetSinkConnection,
    PostgresSinkConnection,
    PostgresSinkMode,
    PostgresSource,
    SinkConnection,
    SourceConnection,
)
from spate.sql import statements as st
from spate.sql.errors import SqlError

if TYPE_CHECKING:
    from spate.environment.operations import EnvironmentOperations


def create_external(env: EnvironmentOperations, stmt: st.Statement) -> None:
    if isinstance(stmt, st.CreateSecret):
        _create_secret(env, stmt)
        return
    if isinstance(stmt, st.CreateConnection):
        entry = ConnectionEntry(
            stmt.name, stmt.sql, stmt.kind, tuple(stmt.options), stmt.password_secret
        )
        env._commit_catalog(lambda s: s.add_connection(entry))
        return
    assert isinstance(stmt, (st.CreateSource, st.CreateSink))
    definition = SqlDefinition(stmt.sql, connection=stmt.connection)
    if isinstance(stmt, st.CreateSource) and stmt.kind == "webhook":
        assert stmt.desc is not None  # a webhook source is a collection the environment writes
        env._run(
            objects.create_table(env.runtime, stmt.name, stmt.desc, (), definition, webhook=True)
        )
        return
    if isinstance(stmt, st.CreateSource):
        connection, tables = _source_connection(env, stmt)
        desc = None if stmt.kind == "kafka" else stmt.desc  # a Kafka source carries its own
        names = dict(stmt.names) if stmt.names else None
        env.create_source(
            stmt.name, connection, tables=tables, desc=desc, names=names, definition=definition
        )
        return
    assert isinstance(stmt, st.CreateSink)
    sink = _sink_connection(env, stmt)
    env.create_sink(stmt.name, from_=stmt.from_, connection=sink, definition=definition)


def _create_secret(env: EnvironmentOperations, stmt: st.CreateSecret) -> None:
    if stmt.if_not_exists and env.runtime.catalog.kind_named(stmt.name) is not None:
        return  # an object of that name exists: skipped, as Materialize does
    secrets = env.runtime.layout.secrets()
    ref = secrets.put(Secret(stmt.value))
    entry = SecretEntry(stmt.name, f"CREATE SECRET {stmt.name} AS '********'", ref)
    try:
        env._commit_catalog(lambda s: s.add_secret(entry))
    except BaseException:
        secrets.delete(ref)  # a failed CREATE SECRET leaves no value behind
        raise


def drop_external(env: EnvironmentOperations, stmt: st.DropObjects) -> None:
    """``DROP SECRET`` or ``DROP CONNECTION`` of ``stmt.names`` (a secret in use by a
    connection only with CASCADE, which drops the connection too), in one catalog commit. A
    connection a source or sink uses is not dropped, with CASCADE neither (0A000)."""
    names = list(stmt.names)
    state = env.runtime.catalog
    refs = [e.reference for e in state.secrets if e.name in names] if stmt.kind == "secret" else []

    def change(s: CatalogState) -> CatalogState:
        for name in names:
            if stmt.kind == "secret":
                s = s.remove_secret(name, cascade=stmt.cascade)
            else:
                s = s.remove_connection(name)
        return s

    try:
        change(state)
    except HasDependents as e:
        if not isinstance(e, ConnectionInUse):  # a secret a connection uses
            raise SqlError(str(e), sqlstate="2BP01") from None
        # CASCADE does not drop sources and sinks: they are stopped by their own DROP
        raise SqlError(
            str(e),
            sqlstate="0A000" if stmt.cascade else "2BP01",
            hint="Drop the sources and sinks that use it first.",
        ) from None
    env._commit_catalog(change)
    secrets = env.runtime.layout.secrets()
    for ref in refs:  # the values, once no committed entry names them
        secrets.delete(ref)


def _connection(env: EnvironmentOperations, name: str) -> ConnectionEntry:
    entry = env.runtime.catalog.connection(name)
    if entry is None:
        raise SqlError(f'connection "{name}" does not exist', sqlstate="42704")
    return entry


def _secret(env: EnvironmentOperations, name: str) -> str:
    rt = env.runtime
    return secret_value(rt.catalog.secrets, rt.layout.secrets(), name)


def _postgres_url(env: EnvironmentOperations, name: str) -> Secret:
    conn = _connection(env, name)
    opts = conn.option_map
    user = quote(opts.get("user", "postgres"), safe="")
    password = ""
    if conn.secret:
        password = ":" + quote(_secret(env, conn.secret), safe="")
    host = opts["host"]
    port = f":{opts['port']}" if "port" in opts else ""
    database = quote(opts.get("database", "postgres"), safe="")
    query = f"?sslmode={quote(opts['sslmode'], safe='')}" if "sslmode" in opts else ""
    return Secret(f"postgresql://{user}{password}@{host}{port}/{database}{query}")


def _kafka_settings(env: EnvironmentOperations, name: str) -> Secret:
    conn = _connection(env, name)
    return sql_kafka.client_settings(conn, _secret(env, conn.secret) if conn.secret else None)


def _mysql_settings(env: EnvironmentOperations, name: str) -> Secret:
    conn = _connection(env, name)
    if conn.kind != "mysql":
        raise SqlError(f'connection "{name}" is not a MYSQL connection', sqlstate="42809")
    opts = conn.option_map
    password = _secret(env, conn.secret) if conn.secret else None
    return mysql_connection_settings(
        opts["host"], int(opts.get("port", 3306)), opts.get("user", "root"), password
    )


def _source_connection(
    env: EnvironmentOperations, stmt: st.CreateSource
) -> tuple[SourceConnection, list[str] | None]:
    opts = dict(stmt.options)
    if stmt.kind == "kafka":
        assert stmt.connection is not None
        return sql_kafka.source(stmt, _kafka_settings(env, stmt.connection)), None
    if stmt.kind == "load-generator":
        kwargs: dict[str, Any] = {}
        if "tick interval" in opts:
            kwargs["tick_interval_ms"] = _duration_ms(str(opts["tick interval"]))
        for key, field_name in (
            ("rows per tick", "rows_per_tick"),
            ("seed", "seed"),
            ("max cardinality", "max_cardinality"),
            ("ticks", "ticks"),
        ):
            if key in opts:
                kwargs[field_name] = int(opts[key])
        if "scale factor" in opts:
            kwargs["scale_factor"] = float(opts["scale factor"])
        generator = LoadGenerator(str(opts["generator"]))
        return LoadGeneratorSource(generator, **kwargs), None
    if stmt.kind == "mysql":
        assert stmt.connection is not None
        server_id = opts.get("server id")
        settings = _mysql_settings(env, stmt.connection)
        mysql = (
            MySqlSource(settings) if server_id is None else MySqlSource(settings, int(server_id))
        )
        return mysql, list(stmt.tables) if stmt.tables is not None else None
    if stmt.kind == "postgres":
        assert stmt.connection is not None
        slot = str(opts.get("slot", f"spate_{stmt.name}"))
        source = PostgresSource(_postgres_url(env, stmt.connection), str(opts["publication"]), slot)
        return source, list(stmt.tables) if stmt.tables is not None else None
    fmt = FileFormat(str(opts["format"]).lower())
    kwargs = {}
    if "pattern" in opts:
        kwargs["pattern"] = str(opts["pattern"])
    if "header" in opts:
        kwargs["csv_header"] = opts["header"] is True or str(opts["header"]).lower() == "true"
    if "poll interval" in opts:
        kwargs["poll_interval_ms"] = _duration_ms(str(opts["poll interval"]))
    return FileSource(str(opts["path"]), fmt, **kwargs), None


def _sink_connection(env: EnvironmentOperations, stmt: st.CreateSink) -> SinkConnection:
    opts = dict(stmt.options)
    if stmt.kind == "parquet":
        return ParquetSinkConnection(str(opts["path"]))
    if stmt.kind == "kafka":
        assert stmt.connection is not None
        return sql_kafka.sink(stmt, _kafka_settings(env, stmt.connection))
    assert stmt.connection is not None
    key = tuple(k for k in str(opts.get("key", "")).split(",") if k)
    mode = PostgresSinkMode(str(opts.get("mode", "upsert" if key else "changelog")).lower())
    kwargs: dict[str, Any] = {}
    if "progress table" in opts:
        kwargs["progress_table"] = str(opts["progress table"])
    return PostgresSinkConnection(
        _postgres_url(env, stmt.connection), str(opts["table"]), mode, key, **kwargs
    )


def _duration_ms(text: str) -> int:
    from sqlglot import exp

    from spate.sql.scalar import ScalarBinder, parse_interval
    from spate.sql.scope import Scope

    return parse_interval(text, exp.Literal.string(text), ScalarBinder(Scope([])))
