"""SQL over the outside world: CREATE and DROP of sources, sinks, secrets and connections, and
the connections their options describe."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from spate.environment import sql_kafka
from spate.environment.sql_state import Definitions
from spate.protocol.mysql import MySqlSource, mysql_connection_settings
from spate.protocol.secret import Secret, SecretRef
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


def create_external(env: EnvironmentOperations, stmt: st.Statement, defs: Definitions) -> None:
    if isinstance(stmt, st.CreateSecret):
        if stmt.if_not_exists and stmt.name in defs.secrets:
            return
        ref = defs.secrets_dir.put(Secret(stmt.value))
        defs.secrets[stmt.name] = ref.id
        defs.items[stmt.name] = f"CREATE SECRET {stmt.name} AS '********'"
        defs.save()
        return
    if isinstance(stmt, st.CreateConnection):
        defs.connections[stmt.name] = {
            "kind": stmt.kind,
            "options": dict(stmt.options),
            "secret": stmt.password_secret,
        }
        defs.items[stmt.name] = stmt.sql
        defs.save()
        return
    if isinstance(stmt, st.CreateSource) and stmt.kind == "webhook":
        assert stmt.desc is not None  # a webhook source is a collection the environment writes
        env.create_table(stmt.name, stmt.desc)
        defs.set(stmt.name, stmt.sql)
        return
    if isinstance(stmt, st.CreateSource):
        connection, tables = _source_connection(stmt, defs)
        desc = None if stmt.kind == "kafka" else stmt.desc  # a Kafka source carries its own
        names = dict(stmt.names) if stmt.names else None
        env.create_source(stmt.name, connection, tables=tables, desc=desc, names=names)
        defs.set(stmt.name, stmt.sql)
        return
    assert isinstance(stmt, st.CreateSink)
    env.create_sink(stmt.name, from_=stmt.from_, connection=_sink_connection(stmt, defs))
    defs.set(stmt.name, stmt.sql)


def drop_external(stmt: st.DropObjects, defs: Definitions) -> None:
    for name in stmt.names:
        if stmt.kind == "secret":
            users = [c for c, v in defs.connections.items() if v.get("secret") == name]
            if users and not stmt.cascade:
                raise SqlError(
                    f'cannot drop secret "{name}": connection {", ".join(users)} uses it',
                    sqlstate="2BP01",
                )
            for c in users:
                defs.connections.pop(c, None)
            ref = defs.secrets.pop(name, None)
            if ref is not None:
                defs.secrets_dir.delete(SecretRef(ref))
        else:
            defs.connections.pop(name, None)
        defs.items.pop(name, None)
    defs.save()


def _postgres_url(defs: Definitions, name: str) -> Secret:
    conn = defs.connections[name]
    opts: dict[str, str] = conn["options"]
    user = quote(opts.get("user", "postgres"), safe="")
    password = ""
    if conn.get("secret"):
        password = ":" + quote(defs.secret_value(conn["secret"]), safe="")
    host = opts["host"]
    port = f":{opts['port']}" if "port" in opts else ""
    database = quote(opts.get("database", "postgres"), safe="")
    query = f"?sslmode={quote(opts['sslmode'], safe='')}" if "sslmode" in opts else ""
    return Secret(f"postgresql://{user}{password}@{host}{port}/{database}{query}")


def _mysql_settings(defs: Definitions, name: str) -> Secret:
    conn = defs.connections[name]
    if conn.get("kind") != "mysql":
        raise SqlError(f'connection "{name}" is not a MYSQL connection', sqlstate="42809")
    opts: dict[str, str] = conn["options"]
    password = defs.secret_value(conn["secret"]) if conn.get("secret") else None
    return mysql_connection_settings(
        opts["host"], int(opts.get("port", 3306)), opts.get("user", "root"), password
    )


def _source_connection(
    stmt: st.CreateSource, defs: Definitions
) -> tuple[SourceConnection, list[str] | None]:
    opts = dict(stmt.options)
    if stmt.kind == "kafka":
        return sql_kafka.source(stmt, defs), None
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
        settings = _mysql_settings(defs, stmt.connection)
        mysql = (
            MySqlSource(settings) if server_id is None else MySqlSource(settings, int(server_id))
        )
        return mysql, list(stmt.tables) if stmt.tables is not None else None
    if stmt.kind == "postgres":
        assert stmt.connection is not None
        slot = str(opts.get("slot", f"spate_{stmt.name}"))
        source = PostgresSource(
            _postgres_url(defs, stmt.connection), str(opts["publication"]), slot
        )
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


def _sink_connection(stmt: st.CreateSink, defs: Definitions) -> SinkConnection:
    opts = dict(stmt.options)
    if stmt.kind == "parquet":
        return ParquetSinkConnection(str(opts["path"]))
    if stmt.kind == "kafka":
        return sql_kafka.sink(stmt, defs)
    assert stmt.connection is not None
    key = tuple(k for k in str(opts.get("key", "")).split(",") if k)
    mode = PostgresSinkMode(str(opts.get("mode", "upsert" if key else "changelog")).lower())
    kwargs: dict[str, Any] = {}
    if "progress table" in opts:
        kwargs["progress_table"] = str(opts["progress table"])
    return PostgresSinkConnection(
        _postgres_url(defs, stmt.connection), str(opts["table"]), mode, key, **kwargs
    )


def _duration_ms(text: str) -> int:
    from sqlglot import exp

    from spate.sql.scalar import ScalarBinder, parse_interval
    from spate.sql.scope import Scope

    return parse_interval(text, exp.Literal.string(text), ScalarBinder(Scope([])))
