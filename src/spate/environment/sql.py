"""``Environment.sql``: run SQL statements through the environment's own operations.

Each statement of the text is split first (a text that does not tokenize runs nothing), then
planned against the catalog as it is when its turn comes (so ``CREATE TABLE t …; INSERT INTO t
…`` works) and carried out by the matching operation of
:class:`~spate.environment.operations.EnvironmentOperations`. A statement that fails changes
nothing (each operation validates first); the ones before it in the same text stay done.
``BEGIN`` … ``COMMIT``/``ROLLBACK`` make a transaction block, with Materialize's rules
(:mod:`spate.environment.sql_block`): a block's writes are buffered and written together at
COMMIT, discarded at ROLLBACK or when a statement of the block fails.

Session settings (``SET cluster``, ``SET transaction_isolation``) live in a :class:`Session`
(:mod:`spate.environment.sql_state`); ``Environment.sql`` keeps one per environment. What SQL
keeps about an object (its CREATE statement, for ``SHOW CREATE`` and ``pg_get_viewdef``; a
view's PostgreSQL column types; secrets and connections) is in the catalog
(:mod:`spate.environment.definitions`): each CREATE hands its statement to the operation that
creates the object (a :class:`~spate.environment.definitions.SqlDefinition`), which commits
both in one compare-and-set; a DROP or RENAME changes them in the commit that drops or renames
the object. Reads are in :mod:`spate.environment.sql_reads`, sources, sinks, secrets and
connections in :mod:`spate.environment.sql_external`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot.tokenizer_core import TokenType

from spate.environment import sql_block, sql_ddl_block
from spate.environment.catalog import (
    CheckConstraint,
    Constraint,
    IndexItem,
    UniqueConstraint,
    kind_of,
)
from spate.environment.clusters import cluster_names
from spate.environment.definitions import SqlDefinition
from spate.environment.pg_catalog_rows import settings_of
from spate.environment.sql_catalog import EnvironmentCatalog
from spate.environment.sql_external import create_external, drop_external
from spate.environment.sql_reads import dml_rows, explain_read, read_rows, select
from spate.environment.sql_state import ACCEPTED_SETTINGS, Result, Session
from spate.environment.sql_subscribe import SqlSubscription
from spate.environment.transaction import Transaction
from spate.errors import CatalogError, InputMissing, check_argument
from spate.ids import GlobalId
from spate.plan.recursive import DEFAULT_MAX_ITERATIONS
from spate.sql import Parsed, parse, plan_statement
from spate.sql import statements as st
from spate.sql.errors import SqlError, UndefinedObject, UndefinedTable
from spate.sql.notices import collecting, warn_if_truncated
from spate.sql.results import narrow_table
from spate.sql.session_statements import (
    Begin,
    Commit,
    Release,
    Rollback,
    Savepoint,
    TransactionControl,
    transaction_control,
)
from spate.sql.tags import command_tag

if TYPE_CHECKING:
    from spate.environment.operations import EnvironmentOperations
    from spate.environment.runtime import Runtime

__all__ = [
    "EnvironmentCatalog",
    "Result",
    "Session",
    "SqlSession",
    "default_cluster_name",
    "execute",
    "run",
]


@dataclass
class SqlSession:
    """One client's SQL session on an environment (see ``Environment.sql_session``)."""

    env: EnvironmentOperations
    session: Session

    def sql(self, text: str, *, dialect: str = "postgres") -> Result:
        return run(self.env, text, dialect, self.session)

    def run_parsed(self, parsed: Parsed) -> Result:
        """Run one statement a caller already split (``spate.sql.parse``): it is not split
        or tokenized again (a wire session splits each query once)."""
        check_argument(parsed, Parsed, "the parsed statement")
        self.session.notices.clear()
        with collecting(self.session.notices):
            for token in parsed.tokens:  # the notices the split raised, as run's split does
                if token.token_type is TokenType.IDENTIFIER:
                    warn_if_truncated(token.text)
                elif token.token_type is TokenType.VAR:
                    warn_if_truncated(token.text.lower())
            self.session.tag = None
            result = _run_one(self.env, parsed, self.session)
            self.session.tag = command_tag(parsed, self.session.rows_affected)
            return result

    def control(self, stmt: TransactionControl) -> None:
        """Run a transaction-control statement a caller already recognised (a wire session's
        ``BEGIN``…): it is not written out as text and parsed again."""
        self.session.notices.clear()
        self.session.rows_affected = None
        block = self.session.block
        try:
            with collecting(self.session.notices):
                _control(self.env, stmt, self.session)
        except BaseException:
            if block is not None and self.session.block is block:
                block.failed = True
            raise

    def set_variable(self, name: str, value: str | None) -> None:
        """``SET name = value`` (``value`` ``None``: ``RESET name``) a caller already
        recognised (a wire session's): it is not written out as text and parsed again."""
        self.session.notices.clear()
        stmt = st.SetVariable(f"SET {name}", name, value)
        with collecting(self.session.notices):
            _run_planned(self.env, lambda _catalog: stmt, self.session)

    def insert_rows(self, table: str, rows: Sequence[Sequence[Any]] | pa.Table) -> int:
        """``rows`` (whole rows of ``table``, or an Arrow table of its columns) written as an
        ``INSERT`` of them is: checked and written at once (``env.insert``), or buffered in the
        session's transaction block under its rules (a COPY FROM STDIN). Returns how many."""
        return insert_rows(self.env, self.session, table, rows)


def run(env: EnvironmentOperations, text: str, dialect: str, session: Session) -> Result:
    """Run every statement of ``text``; the last one's result."""
    check_argument(text, str, "the SQL text")
    session.notices.clear()  # the last call's only
    with collecting(session.notices):
        return _run(env, text, dialect, session)


def _run(env: EnvironmentOperations, text: str, dialect: str, session: Session) -> Result:
    statements = parse(text, dialect=dialect)
    result: Result = None
    for parsed in statements:
        session.tag = None
        result = _run_one(env, parsed, session)
        session.tag = command_tag(parsed, session.rows_affected)
    return result


def _run_one(env: EnvironmentOperations, parsed: Parsed, session: Session) -> Result:
    """One statement, under the rules of the session's transaction block if one is open
    (:mod:`spate.environment.sql_block`)."""
    session.rows_affected = None
    block = session.block
    try:
        control = transaction_control(parsed)
        if control is not None:
            _control(env, control, session)
            return None
    except BaseException:
        if block is not None and session.block is block:
            block.failed = True
        raise
    return _run_planned(
        env,
        lambda catalog: plan_statement(parsed, catalog, recursion_limit=session.recursion_limit),
        session,
    )


def _run_planned(
    env: EnvironmentOperations,
    plan: Callable[[EnvironmentCatalog], st.Statement],
    session: Session,
) -> Result:
    """The statement ``plan`` makes of the catalog, under the rules of the session's block."""
    session.rows_affected = None
    block = session.block
    try:
        if block is not None and block.failed:
            raise sql_block.aborted()
        catalog = EnvironmentCatalog(env)
        if block is not None and block.kind == "ddl" and block.ddl:
            # planned against the catalog as the block's earlier statements will leave it
            catalog.state = sql_ddl_block.pending(catalog.state, block.ddl)
        stmt = plan(catalog)
        if block is not None:
            stmt = sql_block.admit(env, stmt, block)
            if block.kind == "ddl":
                sql_ddl_block.check_reads(stmt, env.runtime.catalog)
                block.ddl.append(stmt)  # carried out at COMMIT
                return None
        try:
            return execute(env, stmt, session)
        except InputMissing as e:
            # dropped by another session after this statement was planned
            gone = catalog.state.find_id(e.id) if isinstance(e.id, GlobalId) else None
            if gone is None:
                raise
            raise UndefinedTable(f'relation "{gone.name}" does not exist') from None
    except BaseException:
        if block is not None and session.block is block:
            block.failed = True
        raise


def insert_rows(
    env: EnvironmentOperations,
    session: Session,
    table: str,
    rows: Sequence[Sequence[Any]] | pa.Table,
) -> int:
    """The statement ``INSERT INTO table VALUES rows…``, its rows already values."""
    session.rows_affected = None
    block = session.block
    try:
        if block is not None and block.failed:
            raise sql_block.aborted()
        if block is None:
            if len(rows):  # the columnar path of env.insert, for an Arrow table
                env.insert(table, rows)
            return len(rows)
        if isinstance(rows, pa.Table):
            rows = list(zip(*(c.to_pylist() for c in rows.columns), strict=True))
        stmt = sql_block.admit(
            env, st.Insert(f"COPY {table} FROM STDIN", table, tuple(map(tuple, rows))), block
        )
        execute(env, stmt, session)
    except BaseException:
        if block is not None and session.block is block:
            block.failed = True
        raise
    return len(rows)


def execute(env: EnvironmentOperations, stmt: st.Statement, session: Session) -> Result:
    """Carry out one planned statement."""
    session.rows_affected = None
    match stmt:
        case st.Select():
            return narrow_table(select(env, stmt, session), stmt.types)
        case st.Rows():
            out = list(stmt.rows)
            if stmt.explained is not None:  # EXPLAIN SELECT: how it would be read
                out += [(line,) for line in explain_read(env, stmt.explained, session)]
            return pa.table({n: [r[i] for r in out] for i, n in enumerate(stmt.names)})
        case st.Subscribe():
            changes = env.subscribe(
                stmt.plan,
                as_of=stmt.as_of,
                up_to=stmt.up_to,
                cluster=session.cluster,
                with_snapshot=stmt.snapshot,
                progress=True,  # a client's stream learns of quiet intervals too
            )
            return SqlSubscription(changes, stmt.plan.desc, stmt.names, stmt.types)
        case st.Insert():
            rows = list(stmt.rows) if stmt.rows is not None else read_rows(env, stmt.plan, session)
            if rows:
                _writer(env, session).insert(stmt.table, rows)
            session.rows_affected = len(rows)
            return None
        case st.Delete():
            rows = dml_rows(env, stmt.plan, session)
            if rows:
                _writer(env, session).delete(stmt.table, rows)
            session.rows_affected = len(rows)
            return None
        case st.Update():
            changed_rows = dml_rows(env, stmt.plan, session)
            pairs = [(r[: stmt.arity], r[stmt.arity :]) for r in changed_rows]
            changed = [(a, b) for a, b in pairs if a != b]
            if changed:
                _writer(env, session).update(stmt.table, changed)
            session.rows_affected = len(pairs)  # matched rows, as PostgreSQL counts them
            return None
        case st.CreateTable():
            if stmt.if_not_exists and env.runtime.catalog.find(stmt.name) is not None:
                return None
            env.create_table(
                stmt.name,
                stmt.desc,
                constraints=_constraints(stmt),
                definition=SqlDefinition(stmt.sql),
            )
            return None
        case st.CreateTableAs():
            _create_table_as(env, stmt, session)
            return None
        case st.CreateView():
            _create_view(env, stmt, session)
            return None
        case st.CreateIndex():
            if stmt.if_not_exists and env.runtime.catalog.find(stmt.name) is not None:
                return None
            create = env.create_unique_index if stmt.unique else env.create_index
            create(
                stmt.name,
                on=stmt.on,
                key=list(stmt.key),
                cluster=stmt.cluster or session.cluster,
                definition=SqlDefinition(stmt.sql),
            )
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
                        env.drop(item.name, cascade=True)
            env.drop_cluster(stmt.name)
            if session.cluster == stmt.name:
                session.cluster = None
            return None
        case st.CreateSecret() | st.CreateConnection() | st.CreateSource() | st.CreateSink():
            create_external(env, stmt)
            return None
        case st.DropObjects() if stmt.kind in ("secret", "connection"):
            drop_external(env, stmt)
            return None
        case st.DropObjects():
            for name in stmt.names:
                if env.runtime.catalog.find(name) is None:
                    continue  # dropped by an earlier CASCADE of this statement
                if stmt.kind == "table" and not stmt.cascade:
                    for index in _own_indexes(env, name):  # they go with it, as in PostgreSQL
                        env.drop(index)
                env.drop(name, cascade=stmt.cascade)
            return None
        case st.AlterRetainHistory():
            from spate.environment.catalog import DEFAULT_RETAIN_HISTORY_MS

            ms = stmt.duration_ms if stmt.duration_ms is not None else DEFAULT_RETAIN_HISTORY_MS
            env.set_retain_history(stmt.name, ms)
            return None
        case st.RenameObject():
            env.rename(stmt.name, stmt.new)  # the kept texts follow (CatalogState.rename_item)
            return None
        case st.NoChange():
            return None
        case st.CommentOn():
            env.comment(stmt.name, stmt.text, column=stmt.column)
            return None
        case st.SetVariable():
            _set(env, stmt, session)
            return None
        case st.ShowVariable():
            return _show(env, stmt, session)
        case st.ShowObjects():
            return _show_objects(env, stmt)
    raise SqlError(f"cannot run {type(stmt).__name__} statements yet", sqlstate="0A000")


def _create_table_as(env: EnvironmentOperations, stmt: st.CreateTableAs, session: Session) -> None:
    """The query is read first (at one timestamp), so that one that fails creates nothing;
    then the table is created and the rows written at once."""
    rows = read_rows(env, stmt.plan, session) if stmt.with_data else []
    env.create_table(stmt.name, stmt.desc, definition=SqlDefinition(stmt.create_sql))
    if rows:
        try:
            env.insert(stmt.name, rows)
        except BaseException:
            env.drop(stmt.name)
            raise
    session.rows_affected = len(rows) if stmt.with_data else None


def _carry_out_ddl(env: EnvironmentOperations, ddl: list[st.Statement], session: Session) -> None:
    """A DDL block's statements at its COMMIT: the first as it would run alone, the pure
    catalog changes after it (their kept texts with them) in one catalog commit, checked
    before the first runs (:mod:`spate.environment.sql_ddl_block`)."""
    # at most one statement is not pure, and only statements that change nothing precede it
    first = next((s for s in ddl if not sql_ddl_block.is_pure(s)), None)
    pure = [s for s in ddl if sql_ddl_block.is_pure(s)]
    if first is not None and not pure:
        execute(env, first, session)
        return
    state = env.runtime.catalog
    if first is not None:
        state = sql_ddl_block.change_of(first)(state)
    try:
        sql_ddl_block.combined(pure, state)  # raises if a change no longer applies
    except CatalogError as e:
        raise SqlError(f"the transaction block no longer applies: {e}", sqlstate="40001") from e
    if first is not None:
        execute(env, first, session)
    env._commit_catalog(sql_ddl_block.combined(pure, env.runtime.catalog))


def _own_indexes(env: EnvironmentOperations, table: str) -> list[str]:
    item = env.runtime.catalog.get(table)
    return [
        d.name
        for d in env.runtime.catalog.dependents(item.id)
        if isinstance(d, IndexItem) and d.on == item.id
    ]


def _constraints(stmt: st.CreateTable) -> list[Constraint]:
    return [
        UniqueConstraint(c.name, c.columns, c.primary)
        if isinstance(c, st.TableKey)
        else CheckConstraint(c.name, c.expr, c.text)
        for c in stmt.constraints
    ]


def _control(env: EnvironmentOperations, stmt: TransactionControl, session: Session) -> None:
    """``BEGIN``, ``COMMIT``, ``ROLLBACK`` and the savepoint statements on the session's
    block (:mod:`spate.environment.sql_block`); a failed block runs only the ends."""
    block = session.block
    if block is not None and block.failed and not isinstance(stmt, (Commit, Rollback)):
        raise sql_block.aborted()
    if isinstance(stmt, Savepoint):
        sql_block.savepoint(session, "SAVEPOINT", stmt.name)
    elif isinstance(stmt, Release):
        sql_block.savepoint(session, "RELEASE", stmt.name)
    elif isinstance(stmt, Rollback) and stmt.savepoint is not None:
        sql_block.savepoint(session, "ROLLBACK TO", stmt.savepoint)
    elif isinstance(stmt, Begin):
        sql_block.begin(env, session, read_only=stmt.read_only)
    elif isinstance(stmt, Rollback):
        sql_block.rollback(session)
    else:
        _, ddl = sql_block.commit(session)
        if ddl:
            _carry_out_ddl(env, ddl, session)


def _writer(env: EnvironmentOperations, session: Session) -> EnvironmentOperations | Transaction:
    """Where a write goes: the open block's buffered writes, or the table at once."""
    return session.block.writes if session.block is not None else env


def _create_view(env: EnvironmentOperations, stmt: st.CreateView, session: Session) -> None:
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
    definition = SqlDefinition(stmt.sql, stmt.types)
    if stmt.materialized:
        env.create_materialized_view(
            stmt.name, stmt.plan, cluster=stmt.cluster or session.cluster, definition=definition
        )
    else:
        env.create_view(stmt.name, stmt.plan, definition=definition)


def _set(env: EnvironmentOperations, stmt: st.SetVariable, session: Session) -> None:
    name = stmt.name.lower()
    if name == "cluster":
        if stmt.value is not None and stmt.value not in cluster_names(env.runtime):
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
    if name == "real_time_recency":
        session.real_time_recency = _boolean(name, stmt.value, default=False)
        return
    if name == "recursion_limit":
        session.recursion_limit = _positive(name, stmt.value, default=DEFAULT_MAX_ITERATIONS)
        return
    if name in ACCEPTED_SETTINGS:
        session.settings[name] = stmt.value or ACCEPTED_SETTINGS[name]
        return
    raise UndefinedObject(f'unrecognized configuration parameter "{stmt.name}"')


_TRUE = ("on", "true", "yes", "1")
_FALSE = ("off", "false", "no", "0")


def _boolean(name: str, value: str | None, *, default: bool) -> bool:
    """A boolean setting as PostgreSQL reads one (``on``/``off``, ``true``/``false``,
    ``yes``/``no``, ``1``/``0``, or a unique prefix of them); ``None`` is the default."""
    if value is None:
        return default
    text = value.strip().lower()
    if text not in ("", "o"):  # "o" could be on or off
        if any(t.startswith(text) for t in _TRUE):
            return True
        if any(f.startswith(text) for f in _FALSE):
            return False
    raise SqlError(f'parameter "{name}" requires a Boolean value', sqlstate="22023")


def _positive(name: str, value: str | None, *, default: int) -> int:
    """A positive integer setting; ``None`` is the default."""
    if value is None:
        return default
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise SqlError(
            f'invalid value for parameter "{name}": "{value}"; expected a positive integer',
            sqlstate="22023",
        )
    return n


def _show(env: EnvironmentOperations, stmt: st.ShowVariable, session: Session) -> pa.Table:
    name = stmt.name.lower()
    values = {
        "cluster": session.cluster or default_cluster_name(env.runtime),
        "transaction_isolation": session.isolation,
        "real_time_recency": "on" if session.real_time_recency else "off",
        "recursion_limit": str(session.recursion_limit),
        **session.settings,
    }
    if name == "all":
        return pa.table({"name": list(values), "setting": [str(v) for v in values.values()]})
    if name not in values:  # one current_setting() shows (server_version_num)
        values = settings_of({**session.settings, **session.client_settings})
    if name not in values:
        raise UndefinedObject(f'unrecognized configuration parameter "{stmt.name}"')
    return pa.table({name: [values[name]]})


def default_cluster_name(rt: Runtime) -> str:
    """The cluster a session that set none runs on (``SHOW cluster``); ``""``: none."""
    if not rt.catalog.clusters and rt.settings.default_cluster:
        return rt.settings.default_cluster  # created on first need
    try:
        return rt.default_cluster(None)
    except Exception:
        return ""


def _show_objects(env: EnvironmentOperations, stmt: st.ShowObjects) -> pa.Table:
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
