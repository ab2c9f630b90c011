"""Executes of prepared statements over an environment: a prepared lookup is planned once.

:func:`execute_prepared` runs an Execute of a prepared statement (:class:`Bound`) in the
connection's SQL session. Outside a transaction block, a statement
:func:`~spate.environment.prepared_plans.parameters_are_keys` accepts keeps its plan in the
prepared statement's cache (:class:`~spate.environment.prepared_plans.LookupTemplate`): its
first execution is run as any statement is, and planned once more to make the template; the
next ones put their values into the template, as long as the catalog is the one it was planned
against, and read it (the read route is chosen again each time). Everything else runs the
bound text as :meth:`SqlSession.sql` does. :func:`start_prepared` answers such an execution
on the calling thread when its rows are in memory here, and keeps what that took once per
statement, so that :func:`lookup_at_once` answers the next ones from their values alone.

:func:`execute_text` does the same for statements without parameters (simple queries, and
prepared statements without parameters), keyed by their text, from their second run on;
:func:`text_at_once` answers such a kept ``SELECT`` on the calling thread when its inputs'
contents are in memory here (:class:`~spate.environment.reads_at_once.HereRead`).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from spate.environment import prepared_plans as plans
from spate.environment import reads, reads_at_once
from spate.environment.pg_catalog_reads import reads_catalog
from spate.environment.reads import rows_table
from spate.environment.sql_catalog import EnvironmentCatalog
from spate.environment.sql_reads import finish, select
from spate.errors import InputMissing, SpateError
from spate.pgwire.engine import Bound, Values
from spate.pgwire.portal import table_rows
from spate.repr.desc import RelationDesc
from spate.repr.types import Row, ScalarKind
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


def start_prepared(
    session: SqlSession, bound: Bound
) -> tuple[Future[pa.Table], st.Select] | Values | None:
    """The read of an Execute of a prepared lookup, and its statement: the read started on
    the environment's event loop without blocking (no worker thread: the caller awaits it),
    when the kept template is valid (planned against the environment's catalog), the values
    fit it, no transaction block is open and the plan needs nothing beyond the read (no
    ``pg_catalog``, no interval columns); ``None`` otherwise (nothing started: run
    :func:`execute_prepared`). Given to :func:`finish_prepared`, its result is the one
    :func:`execute_prepared` gives; it raises what the read raises (an object dropped since
    it was planned: :class:`InputMissing`, which :func:`execute_prepared` answers).

    A lookup whose rows are in memory here, final at its timestamp
    (:func:`~spate.environment.reads_at_once.read_at_once`), is answered at once instead,
    on the calling thread: its finished result (:class:`Values` whose rows are the values of
    that result's table)."""
    state = session.session
    if bound.cache.get("keys") is not True or state.block is not None:
        return None
    cached = bound.cache.get("plan")
    env = session.env
    rt = env.runtime
    if not isinstance(cached, plans.LookupTemplate) or cached.catalog is not rt.catalog:
        return None
    if not plans.fits(cached, bound.values) or not _awaitable(bound, cached):
        return None
    _starting(state)
    if not state.real_time_recency:
        answered = _at_once(session, bound.cache, bound.values, cached)
        if answered is not None:
            return answered
    stmt = plans.instantiate(cached, bound.values, sql=bound.sql)
    if stmt is None:
        return None
    read = reads.select(
        rt,
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


@dataclass(frozen=True, slots=True)
class _Output:
    """The finished result's columns of a template (``schema``), and whether its rows can be
    given as the plan's values themselves (``plain``: no ORDER BY, OFFSET or LIMIT, every
    column a ``bigint``, ``double precision``, ``boolean`` or ``text`` as the plan has it;
    a column's metadata only tells the encoder its PostgreSQL type)."""

    template: plans.LookupTemplate
    schema: pa.Schema
    plain: bool


_PLAIN_TYPES: Final = (pa.int64(), pa.float64(), pa.bool_(), pa.string(), pa.large_string())
_PLAIN_KINDS: Final = frozenset(
    {ScalarKind.INT64, ScalarKind.FLOAT64, ScalarKind.BOOL, ScalarKind.TEXT}
)
"""Column types whose values in a plan's rows are what Arrow's ``to_pylist`` gives of them."""


def _awaitable(bound: Bound, template: plans.LookupTemplate) -> bool:
    """Whether the template's plan needs nothing beyond the read (no ``pg_catalog``, no
    interval columns); found once per template."""
    kept = bound.cache.get("awaitable")
    if not isinstance(kept, tuple) or kept[0] is not template:
        plan = template.statement.plan
        kept = bound.cache["awaitable"] = (
            template,
            not reads_catalog(plan) and not _has_interval(plan.desc),
        )
    return bool(kept[1])


def _output(template: plans.LookupTemplate) -> _Output:
    stmt = template.statement
    desc = stmt.plan.desc
    schema = finish_prepared(stmt, rows_table(desc, [])).schema
    plain = (
        not stmt.order_by
        and stmt.limit is None
        and not stmt.offset
        and all(f.type in _PLAIN_TYPES for f in schema)
        and all(c.type.kind in _PLAIN_KINDS for c in desc.columns[: stmt.width])
    )
    return _Output(template, schema, plain)


@dataclass(frozen=True, slots=True)
class _Lookup:
    """What an execution of a kept lookup answered at once takes, found once (by
    :func:`_at_once`) and used while ``at_once.template`` is the statement's valid template
    and the session's cluster and small reads are ``at_once``'s: where its rows are read
    (``at_once``), its result's columns (``output``), and the Python type of each value
    (``types``: the template's)."""

    at_once: reads_at_once.AtOnce
    output: _Output
    types: tuple[type, ...]
    answers: dict[tuple[object, ...], tuple[list[tuple[Row, int]], Values]] = field(
        default_factory=dict, compare=False
    )
    """The result last given for each key, with the rows it was made of: given again while
    the rows read are that same list (a :attr:`~reads_at_once.Probe.pure` probe's answer,
    kept by the read while its contents are unchanged). A cache; at most :data:`_ANSWERS`."""


_ANSWERS: Final = 16_384


def lookup_at_once(
    session: SqlSession, cache: dict[str, object], values: tuple[object, ...]
) -> Values | None:
    """The result :func:`start_prepared` gives of an Execute of a prepared statement whose
    kept plans are ``cache`` (:attr:`Bound.cache`) with ``values`` when it is answered at
    once, on the calling thread: a kept lookup answered at once before
    (:func:`start_prepared` found the template valid, its plan needing nothing beyond the
    read, and where its rows are), its template still valid (planned against the catalog
    now), the values fitting it, outside a transaction block and without real-time
    recency, its rows in memory here and final at its timestamp
    (:func:`~spate.environment.reads_at_once.read_at_once`). ``None`` otherwise, having done
    nothing (the caller runs the Execute as usual: :func:`start_prepared`)."""
    kept = cache.get("lookup")
    if type(kept) is not _Lookup:
        return None
    state = session.session
    at_once = kept.at_once
    env = session.env
    rt = env.runtime
    if (
        state.block is not None
        or state.real_time_recency
        or at_once.template.catalog is not rt.catalog
        or at_once.cluster != state.cluster
        or at_once.small_reads != state.small_reads
        or cache.get("plan") is not at_once.template
        or not plans.fits_types(kept.types, values)
    ):
        return None
    started = time.monotonic()
    found = reads_at_once.read_at_once(rt, at_once, values, isolation=state.isolation)
    if found is None:
        return None
    _starting(state)
    env.read_done(started)
    if at_once.probe is None or not at_once.probe.pure:  # its rows are new every read
        return _result(kept.output, found)
    answers = kept.answers
    hit = answers.get(values)
    if hit is not None and hit[0] is found:
        return hit[1]
    answer = _result(kept.output, found)
    if len(answers) >= _ANSWERS:
        answers.clear()
    answers[values] = (found, answer)
    return answer


def _at_once(
    session: SqlSession,
    cache: dict[str, object],
    values: tuple[object, ...],
    template: plans.LookupTemplate,
) -> Values | None:
    """The result of an execution of ``template`` with ``values`` read at once
    (:func:`~spate.environment.reads_at_once.read_at_once`), or ``None``; ``cache`` is the
    statement's (:attr:`Bound.cache`), where what :func:`lookup_at_once` takes is kept."""
    state = session.session
    env = session.env
    kept = cache.get("at_once")
    if (
        not isinstance(kept, reads_at_once.AtOnce)
        or kept.template is not template
        or kept.cluster != state.cluster
        or kept.small_reads != state.small_reads
    ):
        kept = cache["at_once"] = reads_at_once.at_once(
            env.runtime, template, cluster=state.cluster, small_reads=state.small_reads
        )
    if kept.item is None:
        return None
    started = time.monotonic()
    found = reads_at_once.read_at_once(env.runtime, kept, values, isolation=state.isolation)
    if found is None:
        return None
    env.read_done(started)
    lookup = cache.get("lookup")
    if type(lookup) is not _Lookup or lookup.at_once is not kept:
        types = plans.slot_types(template)
        lookup = cache["lookup"] = _Lookup(kept, _output(template), types)
    return _result(lookup.output, found)


def _result(output: _Output, found: list[tuple[Row, int]]) -> Values:
    """The finished result of a kept lookup whose plan's rows are ``found``."""
    stmt = output.template.statement
    if output.plain:
        width = stmt.width
        rows = [row[:width] if len(row) != width else row for row, n in found for _ in range(n)]
        return Values(output.schema, rows, f"SELECT {len(rows)}")
    expanded = [r for r, n in found for _ in range(n)]
    return _values(finish_prepared(stmt, rows_table(stmt.plan.desc, expanded)))


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


def text_at_once(session: SqlSession, parsed: Parsed, kept: plans.TextPlans) -> Values | None:
    """The result :func:`execute_text` of ``parsed`` gives, answered at once on the calling
    thread (:func:`~spate.environment.reads_at_once.answer_at_once`: its inputs' contents
    in memory here and final at the read's timestamp, its last answer given again while
    they are the same), as :class:`Values`, when a plan is kept for its text (a
    :func:`~spate.environment.prepared_plans.stable_text` ``SELECT`` run before, the
    catalog unchanged since), no transaction block is open and the session does not ask
    for real-time recency; ``None`` otherwise (nothing done: run :func:`execute_text`)."""
    state = session.session
    if state.block is not None or state.real_time_recency:
        return None
    env = session.env
    rt = env.runtime
    found = kept.kept(parsed.sql, rt.catalog, state.recursion_limit)
    if found is None:
        return None
    key = (state.cluster, state.small_reads)
    here = found.reads.get(key, _UNKNOWN)
    stmt = found.statement
    started = time.monotonic()
    try:
        if here is _UNKNOWN:
            here = found.reads[key] = reads_at_once.here_read(
                rt, stmt, cluster=state.cluster, small_reads=state.small_reads
            )
        if not isinstance(here, reads_at_once.HereRead):
            return None
        answer = reads_at_once.answer_at_once(
            rt, here, state.isolation, lambda table: _values(finish_prepared(stmt, table))
        )
    except (SpateError, LookupError, RecursionError):  # the read says what is wrong
        return None
    if answer is None:
        return None
    _starting(state)
    env.read_done(started)
    return answer


_UNKNOWN: Final = object()


def _values(table: pa.Table) -> Values:
    return Values(table.schema, table_rows(table), f"SELECT {table.num_rows}")


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
