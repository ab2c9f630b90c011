"""``Environment.sql``: run SQL statements through the environment's own operations.

Each statement of the text is split first (a text that does not tokenize runs nothing), then
planned against the catalog as it is when its turn comes (so ``CREATE TABLE t …; INSERT INTO t
…`` works) and carried out by the matching :class:`~spate.environment.api.Environment` method.
A statement that fails changes nothing (each Environment operation validates first); the ones
before it in the same text stay done.

Session settings (``SET cluster``, ``SET transaction_isolation``) live in a :class:`Session`;
``Environment.sql`` keeps one per environment. The statements objects were created with are
kept in ``<data_dir>/sql/definitions.json`` for ``SHOW CREATE``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import quote

import pyarrow as pa

from spate.environment.catalog import (
    IndexItem,
    MaterializedViewItem,
    SinkItem,
    SourceItem,
    SubsourceItem,
    TableItem,
    item_desc,
    kind_of,
)
from spate.environment.lookup import is_index_lookup
from spate.environment.reads import check_isolation
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import Filter, Get, Map, Project, RelationExpr
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
from spate.repr.arrow import data_schema
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.sql import parse, plan_statement
from spate.sql import statements as st
from spate.sql.catalog import CatalogObject
from spate.sql.errors import SqlError, UndefinedObject
from spate.storage.secrets import SecretsDir

if TYPE_CHECKING:
    from spate.environment.api import Environment

Result: TypeAlias = pa.Table | Iterator[list[tuple[int, Row, int]]] | None

_ACCEPTED_SETTINGS = {
    "datestyle": "ISO, MDY",
    "timezone": "UTC",
    "extra_float_digits": "1",
    "client_encoding": "UTF8",
    "application_name": "",
    "search_path": "public",
    "statement_timeout": "0",
    "standard_conforming_strings": "on",
    "client_min_messages": "notice",
}


@dataclass
class Session:
    """Per-connection settings: the cluster reads and new objects use, the read isolation."""

    cluster: str | None = None
    isolation: str = "strict serializable"
    settings: dict[str, str] = field(default_factory=lambda: dict(_ACCEPTED_SETTINGS))

    def read_timeout(self) -> float:
        """Seconds a read waits (``SET statement_timeout`` in ms; 0, the default: 300 s)."""
        try:
            ms = int(self.settings.get("statement_timeout", "0"))
        except ValueError:
            ms = 0
        return ms / 1000 if ms > 0 else 300.0


class EnvironmentCatalog:
    """The planner's view of an environment's catalog (:class:`spate.sql.Catalog`)."""

    def __init__(self, env: Environment, sql: Definitions) -> None:
        self.state = env.runtime.catalog
        self.sql = sql
        self.definitions = sql.items

    def _object(self, item: Any) -> CatalogObject:
        kind = kind_of(item)
        desc = item_desc(item) if not isinstance(item, IndexItem) else None
        on = cluster = None
        key: tuple[str, ...] = ()
        if isinstance(item, IndexItem):
            target = self.state.by_id(item.on)
            on, cluster = target.name, item.cluster
            target_desc = item_desc(target)
            if target_desc is not None:
                key = tuple(target_desc.names[k] for k in item.key)
        elif isinstance(item, MaterializedViewItem):
            cluster = item.cluster
        elif isinstance(item, SinkItem):
            on = self.state.by_id(item.from_id).name
        own_subsources = isinstance(item, SourceItem)
        dependents = tuple(
            d.name
            for d in self.state.dependents(item.id)
            if not (own_subsources and isinstance(d, SubsourceItem))
        )
        return CatalogObject(
            item.name,
            kind,
            item.id,
            desc,
            self.definitions.get(item.name),
            on,
            cluster,
            key,
            dependents,
        )

    def lookup(self, name: str) -> CatalogObject | None:
        item = self.state.find(name)
        if item is not None:
            return self._object(item)
        if name in self.sql.secrets:
            return CatalogObject(name, "secret", create_sql=self.definitions.get(name))
        if name in self.sql.connections:
            return CatalogObject(name, "connection", create_sql=self.definitions.get(name))
        return None

    def objects(self) -> Sequence[CatalogObject]:
        out = [self._object(i) for i in self.state]
        out += [CatalogObject(n, "secret") for n in self.sql.secrets]
        out += [CatalogObject(n, "connection") for n in self.sql.connections]
        return out

    def cluster_names(self) -> Sequence[str]:
        return [c.name for c in self.state.clusters]


class Definitions:
    """What SQL keeps beside the catalog, in ``<data_dir>/sql/definitions.json``: the CREATE
    statement of each object made in SQL (for SHOW CREATE), the secrets (by reference: their
    values are in the secrets directory) and the connections (their options, the name of their
    password secret)."""

    def __init__(self, data_dir: Path, secrets: SecretsDir) -> None:
        self.path = data_dir / "sql" / "definitions.json"
        self.secrets_dir = secrets
        self.lock = threading.Lock()
        self.items: dict[str, str] = {}
        self.secrets: dict[str, str] = {}
        self.connections: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            doc = json.loads(self.path.read_text())
            self.items = dict(doc.get("definitions", {}))
            self.secrets = dict(doc.get("secrets", {}))
            self.connections = dict(doc.get("connections", {}))

    def set(self, name: str, sql: str | None) -> None:
        if sql is None:
            self.items.pop(name, None)
        else:
            self.items[name] = sql
        self.save()

    def save(self) -> None:
        with self.lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            doc = {
                "definitions": self.items,
                "secrets": self.secrets,
                "connections": self.connections,
            }
            tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
            os.replace(tmp, self.path)

    def secret_value(self, name: str) -> str:
        return self.secrets_dir.get(SecretRef(self.secrets[name])).reveal()


@dataclass
class SqlSession:
    """One client's SQL session on an environment (see ``Environment.sql_session``)."""

    env: Environment
    session: Session
    definitions: Definitions

    def sql(self, text: str, *, dialect: str = "postgres") -> Result:
        return run(self.env, text, dialect, self.session, self.definitions)


def run(env: Environment, text: str, dialect: str, session: Session, defs: Definitions) -> Result:
    """Run every statement of ``text``; the last one's result."""
    statements = parse(text, dialect=dialect)
    result: Result = None
    for parsed in statements:
        stmt = plan_statement(parsed, EnvironmentCatalog(env, defs))
        result = execute(env, stmt, session, defs)
    return result


def execute(env: Environment, stmt: st.Statement, session: Session, defs: Definitions) -> Result:
    """Carry out one planned statement."""
    match stmt:
        case st.Select():
            return _select(env, stmt, session)
        case st.Rows():
            return pa.table({n: [r[i] for r in stmt.rows] for i, n in enumerate(stmt.names)})
        case st.Subscribe():
            return env.subscribe(
                stmt.plan,
                as_of=stmt.as_of,
                up_to=stmt.up_to,
                cluster=session.cluster,
                with_snapshot=stmt.snapshot,
            )
        case st.Insert():
            rows = list(stmt.rows) if stmt.rows is not None else _rows(env, stmt.plan, session)
            if rows:
                env.insert(stmt.table, rows)
            return None
        case st.Delete():
            rows = _dml_rows(env, stmt.plan, session)
            if rows:
                env.delete(stmt.table, rows)
            return None
        case st.Update():
            changed_rows = _dml_rows(env, stmt.plan, session)
            pairs = [(r[: stmt.arity], r[stmt.arity :]) for r in changed_rows]
            changed = [(a, b) for a, b in pairs if a != b]
            if changed:
                env.update(stmt.table, changed)
            return None
        case st.CreateTable():
            if stmt.if_not_exists and env.runtime.catalog.find(stmt.name) is not None:
                return None
            env.create_table(stmt.name, stmt.desc)
            defs.set(stmt.name, stmt.sql)
            return None
        case st.CreateView():
            _create_view(env, stmt, session, defs)
            return None
        case st.CreateIndex():
            if stmt.if_not_exists and env.runtime.catalog.find(stmt.name) is not None:
                return None
            env.create_index(
                stmt.name, on=stmt.on, key=list(stmt.key), cluster=stmt.cluster or session.cluster
            )
            defs.set(stmt.name, stmt.sql)
            return None
        case st.CreateCluster():
            replicas = list(stmt.replicas) if stmt.replicas is not None else 1
            env.create_cluster(stmt.name, replicas=replicas)
            return None
        case st.CreateClusterReplica():
            env.add_replica(stmt.cluster, stmt.name)
            return None
        case st.DropClusterReplica():
            env.drop_replica(stmt.cluster, stmt.name)
            return None
        case st.DropCluster():
            if stmt.if_exists and stmt.name not in [c.name for c in env.runtime.catalog.clusters]:
                return None
            if stmt.cascade:
                for item in env.runtime.catalog.objects_on(stmt.name):
                    if env.runtime.catalog.find(item.name) is not None:
                        for name in env.drop(item.name, cascade=True):
                            defs.set(name, None)
            env.drop_cluster(stmt.name)
            if session.cluster == stmt.name:
                session.cluster = None
            return None
        case st.CreateSecret() | st.CreateConnection() | st.CreateSource() | st.CreateSink():
            _create_external(env, stmt, defs)
            return None
        case st.DropObjects() if stmt.kind in ("secret", "connection"):
            _drop_external(stmt, defs)
            return None
        case st.DropObjects():
            for name in stmt.names:
                if env.runtime.catalog.find(name) is None:
                    continue  # dropped by an earlier CASCADE of this statement
                for dropped in env.drop(name, cascade=stmt.cascade):
                    defs.set(dropped, None)
            return None
        case st.AlterRetainHistory():
            from spate.environment.catalog import DEFAULT_RETAIN_HISTORY_MS

            ms = stmt.duration_ms if stmt.duration_ms is not None else DEFAULT_RETAIN_HISTORY_MS
            env.set_retain_history(stmt.name, ms)
            return None
        case st.SetVariable():
            _set(env, stmt, session)
            return None
        case st.ShowVariable():
            return _show(env, stmt, session)
        case st.ShowObjects():
            return _show_objects(env, stmt)
    raise SqlError(f"cannot run {type(stmt).__name__} statements yet", sqlstate="0A000")


def _create_external(env: Environment, stmt: st.Statement, defs: Definitions) -> None:
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
            "options": dict(stmt.options),
            "secret": stmt.password_secret,
        }
        defs.items[stmt.name] = stmt.sql
        defs.save()
        return
    if isinstance(stmt, st.CreateSource):
        connection, tables = _source_connection(stmt, defs)
        env.create_source(stmt.name, connection, tables=tables, desc=stmt.desc)
        defs.set(stmt.name, stmt.sql)
        return
    assert isinstance(stmt, st.CreateSink)
    env.create_sink(stmt.name, from_=stmt.from_, connection=_sink_connection(stmt, defs))
    defs.set(stmt.name, stmt.sql)


def _drop_external(stmt: st.DropObjects, defs: Definitions) -> None:
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


def _source_connection(
    stmt: st.CreateSource, defs: Definitions
) -> tuple[SourceConnection, list[str] | None]:
    opts = dict(stmt.options)
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


def _create_view(
    env: Environment, stmt: st.CreateView, session: Session, defs: Definitions
) -> None:
    existing = env.runtime.catalog.find(stmt.name)
    if existing is not None:
        if stmt.if_not_exists:
            return
        want = "materialized view" if stmt.materialized else "view"
        if kind_of(existing) != want:
            raise SqlError(
                f'"{stmt.name}" is a {kind_of(existing)}, not a {want}', sqlstate="42809"
            )
        if env.runtime.catalog.dependents(existing.id):
            raise SqlError(
                f'cannot replace {want} "{stmt.name}": other objects depend on it',
                sqlstate="2BP01",
            )
        env.drop(stmt.name)
    if stmt.materialized:
        env.create_materialized_view(stmt.name, stmt.plan, cluster=stmt.cluster or session.cluster)
    else:
        env.create_view(stmt.name, stmt.plan)
    defs.set(stmt.name, stmt.sql)


def _read(
    env: Environment, plan: RelationExpr, session: Session, as_of: int | None = None
) -> pa.Table:
    """The contents of ``plan``: a read through the environment, or, for a plan that reads no
    collection (``SELECT 1``, ``VALUES …``), evaluated here by the IR's reference semantics
    (a dataflow without inputs would never see its frontier advance)."""
    if not plan.depends_on():
        from spate.testing.reference import evaluate

        now = as_of if as_of is not None else env.runtime.oracle.read_ts()
        counts = evaluate(plan, {}, now)
        rows = [r for r, n in counts.items() for _ in range(max(n, 0))]
        names = plan.desc.names
        return pa.Table.from_pylist(
            [dict(zip(names, r, strict=True)) for r in rows], schema=data_schema(plan.desc)
        )
    base = _linear_over_get(plan)
    if (
        base is not None
        and base is not plan
        and not is_index_lookup(env.runtime, plan, session.cluster)
    ):
        # map/filter/project over one object: read the object (an index or a collection,
        # no dataflow) and apply the rest here, by the IR's reference semantics
        from collections import Counter

        from spate.testing.reference import evaluate

        contents = Counter(_table_rows(_read(env, base, session, as_of)))
        counts = evaluate(plan, {base.id: contents}, env.runtime.oracle.read_ts())
        rows = [r for r, n in counts.items() for _ in range(n)]
        names = plan.desc.names
        return pa.Table.from_pylist(
            [dict(zip(names, r, strict=True)) for r in rows], schema=data_schema(plan.desc)
        )
    target: Any = plan
    if isinstance(plan, Get):
        target = env.runtime.catalog.by_id(plan.id).name
    return env.select(
        target,
        as_of=as_of,
        cluster=session.cluster,
        isolation=check_isolation(session.isolation),
        timeout=session.read_timeout(),
    )


def _linear_over_get(plan: RelationExpr) -> Get | None:
    """The ``Get`` under a chain of ``Map``/``Filter``/``Project`` (no temporal filter) that
    reads a catalog object other than a view; else ``None``."""
    node = plan
    while isinstance(node, (Map, Filter, Project)):
        if isinstance(node, Filter) and node.is_temporal():
            return None
        node = node.input
    return node if isinstance(node, Get) else None


def _table_rows(table: pa.Table) -> list[Row]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [tuple(c[i] for c in columns) for i in range(table.num_rows)]


def _dml_rows(env: Environment, plan: RelationExpr, session: Session) -> list[Row]:
    """The rows an UPDATE or DELETE changes. When ``plan`` reads only the table itself (a
    WHERE without subqueries over other objects), the table is read once (no dataflow) and the
    plan evaluated here by the IR's reference semantics; otherwise ``plan`` is read."""
    ids = plan.depends_on()
    if len(ids) == 1:
        (id,) = ids
        item = env.runtime.catalog.by_id(id)
        if isinstance(item, TableItem):
            from collections import Counter

            from spate.testing.reference import evaluate

            contents = Counter(_table_rows(_read(env, Get(id, item.desc), session)))
            counts = evaluate(plan, {id: contents}, env.runtime.oracle.read_ts())
            return [r for r, n in counts.items() for _ in range(n)]
    return _rows(env, plan, session)


def _rows(env: Environment, plan: Any, session: Session) -> list[Row]:
    table = _read(env, plan, session)
    names = table.column_names
    columns = [table.column(i).to_pylist() for i in range(len(names))]
    return [tuple(c[i] for c in columns) for i in range(table.num_rows)]


def _select(env: Environment, stmt: st.Select, session: Session) -> pa.Table:
    table = _read(env, stmt.plan, session, stmt.as_of)
    return finish(table, stmt.plan.desc, stmt)


def finish(table: pa.Table, desc: RelationDesc, stmt: st.Select) -> pa.Table:
    """ORDER BY (PostgreSQL NULL placement, NaN last), OFFSET, LIMIT, the output columns and
    their SQL names, applied to a read's rows."""
    width = stmt.width
    if stmt.order_by or stmt.offset or stmt.limit is not None:
        rows: list[Row] = [tuple(r.values()) for r in table.to_pylist()]
        if stmt.order_by:
            orders = stmt.order_by

            def cmp(a: Row, b: Row) -> int:
                return _compare(orders, a, b)

            rows.sort(key=functools.cmp_to_key(cmp))
        end = None if stmt.limit is None else stmt.offset + stmt.limit
        rows = rows[stmt.offset : end]
        schema = data_schema(desc)
        table = pa.Table.from_pylist(
            [dict(zip(desc.names, r, strict=True)) for r in rows], schema=schema
        )
    table = table.select(list(range(width)))
    return table.rename_columns(list(stmt.names))


def _compare(orders: Sequence[ColumnOrder], a: Row, b: Row) -> int:
    for o in orders:
        x, y = a[o.column], b[o.column]
        if x is None or y is None:
            if x is None and y is None:
                continue
            nulls_last = o.effective_nulls_last()
            return (1 if nulls_last else -1) * (1 if x is None else -1)
        c = _cmp_values(x, y)
        if c:
            return -c if o.desc else c
    return 0


def _cmp_values(x: Any, y: Any) -> int:
    if isinstance(x, float) and isinstance(y, float):
        xn, yn = math.isnan(x), math.isnan(y)
        if xn or yn:
            return 0 if xn and yn else (1 if xn else -1)
    return int(x > y) - int(x < y)


def _set(env: Environment, stmt: st.SetVariable, session: Session) -> None:
    name = stmt.name.lower()
    if name == "cluster":
        if stmt.value is not None and stmt.value not in [
            c.name for c in env.runtime.catalog.clusters
        ]:
            raise UndefinedObject(f"unknown cluster '{stmt.value}'")
        session.cluster = stmt.value
        return
    if name == "transaction_isolation":
        value = (stmt.value or "strict serializable").lower().replace("_", " ")
        if value not in ("serializable", "strict serializable"):
            raise SqlError(
                f'invalid value for parameter "transaction_isolation": "{stmt.value}"; '
                "expected serializable or strict serializable",
                sqlstate="22023",
            )
        session.isolation = value
        return
    if name in _ACCEPTED_SETTINGS:
        session.settings[name] = stmt.value or _ACCEPTED_SETTINGS[name]
        return
    raise UndefinedObject(f'unrecognized configuration parameter "{stmt.name}"')


def _show(env: Environment, stmt: st.ShowVariable, session: Session) -> pa.Table:
    name = stmt.name.lower()
    values = {
        "cluster": session.cluster or _default_cluster(env),
        "transaction_isolation": session.isolation,
        **session.settings,
    }
    if name == "all":
        return pa.table({"name": list(values), "setting": [str(v) for v in values.values()]})
    if name not in values:
        raise UndefinedObject(f'unrecognized configuration parameter "{stmt.name}"')
    return pa.table({name: [values[name]]})


def _default_cluster(env: Environment) -> str:
    try:
        return env.runtime.default_cluster(None)
    except Exception:
        return ""


def _show_objects(env: Environment, stmt: st.ShowObjects) -> pa.Table:
    clusters = env.runtime.catalog.clusters
    if stmt.kind == "cluster":
        return pa.table(
            {
                "name": [c.name for c in clusters],
                "replicas": [", ".join(r.name for r in c.replicas) for c in clusters],
            }
        )
    pairs = [(c.name, r.name) for c in clusters for r in c.replicas]
    return pa.table({"cluster": [c for c, _ in pairs], "replica": [r for _, r in pairs]})
