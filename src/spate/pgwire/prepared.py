"""Executes of prepared statements over an environment: a prepared lookup is planned once.

:func:`execute_prepared` runs an Execute of a prepared statement (:class:`Bound`) in the
connection's SQL session. Outside a transaction block, a statement
:func:`~spate.environment.prepared_plans.parameters_are_keys` accepts keeps its plan in the
prepared statement's cache (:class:`~spate.environment.prepared_plans.LookupTemplate`): its
first execution is run as any statement is, and planned once more to make the template; the
next ones put their values into the template, as long as the catalog is the one it was planned
against, and read it (the read route is chosen again each time). Everything else runs the
bound text as :meth:`SqlSession.sql` does.

:func:`execute_text` does the same for statements without parameters (simple queries, and
prepared statements without parameters), keyed by their text, from their second run on.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING

import pyarrow as pa

from spate.environment import prepared_plans as plans
from spate.environment import reads
from spate.environment.pg_catalog_reads import reads_catalog
from spate.environment.sql_catalog import EnvironmentCatalog
from spate.environment.sql_reads import finish, select
from spate.errors import InputMissing
from spate.pgwire.engine import Bound
from spate.repr.desc import RelationDesc
from spate.repr.types import ScalarKind
from spate.sql import Parsed, parse, plan_statement
from spate.sql import statements as st
from spate.sql.results import narrow_table

if TYPE_CHECKING:
    from spate.environment.sql import SqlSession
    from spate.environment.sql_state import Session


def execute_prepared(session: SqlSession, bound: Bound) -> object:
    """The result :meth:`SqlSession.sql` of ``bound.sql`` gives, from the statement's kept
    plan when it has a valid one."""
    state = session.session
    keys = bound.cache.get("keys")
    if keys is None:
        keys = bound.cache["keys"] = plans.parameters_are_keys(bound.statement, len(bound.values))
    if not keys or state.block is not None:
        return session.sql(bound.sql)
    cached = bound.cache.get("plan")
    if isinstance(cached, plans.LookupTemplate) and cached.catalog is session.env.runtime.catalog:
        stmt = plans.instantiate(cached, bound.values, sql=bound.sql)
        if stmt is not None:
            try:
                return _select(session, stmt)
            except InputMissing:  # dropped since: the text, planned again, says what is gone
                return session.sql(bound.sql)
    elif cached is None or getattr(cached, "catalog", None) is not session.env.runtime.catalog:
        (parsed,) = parse(bound.sql)
        result = session.run_parsed(parsed)
        catalog = EnvironmentCatalog(session.env)
        planned = plan_statement(parsed, catalog, recursion_limit=state.recursion_limit)
        bound.cache["plan"] = plans.make_template(catalog.state, planned, bound.values)
        return result
    return session.sql(bound.sql)


def start_prepared(session: SqlSession, bound: Bound) -> tuple[Future[pa.Table], st.Select] | None:
    """The read of an Execute of a prepared lookup, and its statement: the read started on
    the environment's event loop without blocking (no worker thread: the caller awaits it),
    when the kept template is valid (planned against the environment's catalog), the values
    fit it, no transaction block is open and the plan needs nothing beyond the read (no
    ``pg_catalog``, no interval columns); ``None`` otherwise (nothing started: run
    :func:`execute_prepared`). Given to :func:`finish_prepared`, its result is the one
    :func:`execute_prepared` gives; it raises what the read raises (an object dropped since
    it was planned: :class:`InputMissing`, which :func:`execute_prepared` answers)."""
    state = session.session
    if bound.cache.get("keys") is not True or state.block is not None:
        return None
    cached = bound.cache.get("plan")
    env = session.env
    if not isinstance(cached, plans.LookupTemplate) or cached.catalog is not env.runtime.catalog:
        return None
    stmt = plans.instantiate(cached, bound.values, sql=bound.sql)
    if stmt is None or reads_catalog(stmt.plan) or _has_interval(stmt.plan.desc):
        return None
    _starting(state)
    read = reads.select(
        env.runtime,
        stmt.plan,
        as_of=stmt.as_of,
        cluster=state.cluster,
        isolation=state.isolation,
        real_time_recency=state.real_time_recency and stmt.as_of is None,
        timeout=state.read_timeout(),
        small_reads=state.small_reads,
    )
    future: Future[pa.Table] = env.start_read(read)
    return future, stmt


def finish_prepared(stmt: st.Select, table: pa.Table) -> pa.Table:
    """The result of the read :func:`start_prepared` started for ``stmt``: ORDER BY,
    OFFSET, LIMIT and the output columns applied, as :func:`execute_prepared` applies them."""
    return narrow_table(finish(table, stmt.plan.desc, stmt), stmt.types)


def _has_interval(desc: RelationDesc) -> bool:
    return any(c.type.kind is ScalarKind.INTERVAL for c in desc.columns)


def execute_text(session: SqlSession, parsed: Parsed, kept: plans.TextPlans) -> object:
    """The result :meth:`SqlSession.run_parsed` of ``parsed`` (a statement without
    parameters) gives; a :func:`~spate.environment.prepared_plans.stable_text` SELECT run
    again outside a transaction block is read from the plan ``kept`` for its text, while the
    catalog is the one it was planned against."""
    state = session.session
    if state.block is not None or not plans.stable_text(parsed):
        return session.run_parsed(parsed)
    stmt = kept.get(parsed.sql, session.env.runtime.catalog, state.recursion_limit)
    if stmt is not None:
        try:
            return _select(session, stmt)
        except InputMissing:  # dropped since: the text, planned again, says what is gone
            return session.run_parsed(parsed)
    result = session.run_parsed(parsed)
    if kept.again(parsed.sql):  # run before: worth a plan kept (planned once more here)
        catalog = EnvironmentCatalog(session.env)
        planned = plan_statement(parsed, catalog, recursion_limit=state.recursion_limit)
        if isinstance(planned, st.Select) and not reads_catalog(planned.plan):
            kept.put(parsed.sql, plans.KeptPlan(catalog.state, state.recursion_limit, planned))
    return result


def _select(session: SqlSession, stmt: st.Select) -> object:
    """A planned SELECT read in the session, as ``Environment.sql`` reads one."""
    state = session.session
    _starting(state)
    return narrow_table(select(session.env, stmt, state), stmt.types)


def _starting(state: Session) -> None:
    """A statement starts in the session: the last one's notices, row count and tag go."""
    state.notices.clear()
    state.rows_affected = None
    state.tag = None
