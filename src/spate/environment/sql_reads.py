"""Reads for SQL: SELECT, the rows an UPDATE or DELETE changes, and ORDER BY/OFFSET/LIMIT
applied to what a read returns.

How a read is answered is the read plan's (:mod:`spate.environment.read_plan`); UPDATE/DELETE
whose WHERE reads only the table read the table once and evaluate the rest here in plain
Python (:mod:`spate.plan.evaluation`)."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from spate.environment import pg_catalog_reads
from spate.environment.catalog import (
    TableItem,
)
from spate.environment.read_plan import Constant, explain_lines, plan_read
from spate.environment.reads import check_isolation, evaluate_constant, rows_table
from spate.environment.sql_state import Session
from spate.errors import EvalError, EvaluationFailed
from spate.ids import GlobalId
from spate.plan.evaluation.relation import evaluate
from spate.plan.evaluation.values import compare_by
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import Filter, Get, Map, Project, RelationExpr
from spate.repr.arrow import decode_rows, to_user
from spate.repr.desc import RelationDesc
from spate.repr.types import Row, ScalarKind
from spate.sql import statements as st

if TYPE_CHECKING:
    from spate.environment.operations import EnvironmentOperations


def read(
    env: EnvironmentOperations, plan: RelationExpr, session: Session, as_of: int | None = None
) -> pa.Table:
    """The contents of ``plan``, read by the route :func:`~spate.environment.read_plan.plan_read`
    chooses (``pg_catalog`` and ``information_schema`` are read here, from the catalog). A
    constant plan (``SELECT 1``, ``VALUES …``) is evaluated on the caller's thread, and so is
    a read of inputs whose contents are cached here (``EnvironmentOperations.select_seen``);
    interval result columns computed over a read (which dataflows do not compute) are split off
    and evaluated here over the read of what is under them."""
    if pg_catalog_reads.reads_catalog(plan):  # pg_catalog, information_schema: read here

        def other(get: Get) -> list[Row]:
            return table_rows(read(env, get, session, as_of), get.desc)

        now = as_of if as_of is not None else env.runtime.oracle.read_ts()
        return pg_catalog_reads.read(env, plan, session, now, other)
    route = plan_read(env.runtime, plan, session.cluster, small_reads=session.small_reads)
    if isinstance(route, Constant):
        now = as_of if as_of is not None else env.runtime.oracle.read_ts()
        rows = [r for r, n in evaluate_constant(plan, now) for _ in range(max(n, 0))]
        return rows_table(plan.desc, rows)
    split = _interval_top(plan)
    if split is not None:
        # interval result columns computed over a dataflow's result: the dataflow computes
        # what is under them, and the maps, filters and projections above it run here
        top, inner = split
        contents = Counter(table_rows(read(env, inner, session, as_of), inner.desc))
        try:
            counts = evaluate(top, {_HERE: contents}, env.runtime.oracle.read_ts())
        except EvalError as e:
            raise EvaluationFailed.of("query", e) from None
        rows = [r for r, n in counts.items() for _ in range(n)]
        return rows_table(plan.desc, rows)
    isolation = check_isolation(session.isolation)
    if not (session.real_time_recency and as_of is None):
        seen = env.select_seen(route, as_of=as_of, isolation=isolation)
        if seen is not None:
            return seen
    target: Any = plan
    if isinstance(plan, Get):
        target = env.runtime.catalog.by_id(plan.id).name
    return env.select(
        target,
        as_of=as_of,
        cluster=session.cluster,
        isolation=isolation,
        real_time_recency=session.real_time_recency and as_of is None,
        timeout=session.read_timeout(),
        small_reads=session.small_reads,
        cancel=session.cancel,
    )


def explain_read(env: EnvironmentOperations, plan: RelationExpr, session: Session) -> list[str]:
    """How a read of ``plan`` in ``session`` would be answered now (``EXPLAIN``'s last lines)."""
    route = plan_read(env.runtime, plan, session.cluster, small_reads=session.small_reads)
    return explain_lines(env.runtime, route)


_HERE = GlobalId.transient(2**63 - 1)
"""The input of the part of a read evaluated here, over what a dataflow computed."""


def _has_interval(desc: RelationDesc) -> bool:
    return any(c.type.kind is ScalarKind.INTERVAL for c in desc.columns)


def _interval_top(plan: RelationExpr) -> tuple[RelationExpr, RelationExpr] | None:
    """For a plan with interval result columns made by a chain of ``Map``/``Filter``/``Project``
    (no temporal filter) over a plan without intervals: the chain, reading ``_HERE``, and that
    plan; else ``None``."""
    if not _has_interval(plan.desc):
        return None
    chain: list[Map | Filter | Project] = []
    node = plan
    while isinstance(node, (Map, Filter, Project)) and _has_interval(node.desc):
        if isinstance(node, Filter) and node.is_temporal():
            return None
        chain.append(node)
        node = node.input
    if _has_interval(node.desc):
        return None
    top: RelationExpr = Get(_HERE, node.desc)
    for above in reversed(chain):
        top = dataclasses.replace(above, input=top)
    return top, node


def table_rows(table: pa.Table, desc: RelationDesc) -> list[Row]:
    """The rows of a read of ``desc``'s columns (intervals as ``Interval`` values)."""
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return decode_rows(desc, [tuple(c[i] for c in columns) for i in range(table.num_rows)])


def dml_rows(env: EnvironmentOperations, plan: RelationExpr, session: Session) -> list[Row]:
    """The rows an UPDATE or DELETE changes. When ``plan`` reads only the table itself (a
    WHERE without subqueries over other objects), the table is read once (no dataflow) and the
    plan evaluated here in plain Python; otherwise ``plan`` is read."""
    ids = plan.depends_on()
    if len(ids) == 1:
        (id,) = ids
        item = env.runtime.catalog.by_id(id)
        if isinstance(item, TableItem):
            contents = Counter(table_rows(read(env, Get(id, item.desc), session), item.desc))
            try:
                counts = evaluate(plan, {id: contents}, env.runtime.oracle.read_ts())
            except EvalError as e:
                raise EvaluationFailed.of(f"reading {item.name}", e) from None
            return [r for r, n in counts.items() for _ in range(n)]
    return read_rows(env, plan, session)


def read_rows(env: EnvironmentOperations, plan: Any, session: Session) -> list[Row]:
    return table_rows(read(env, plan, session), plan.desc)


def select(env: EnvironmentOperations, stmt: st.Select, session: Session) -> pa.Table:
    table = read(env, stmt.plan, session, stmt.as_of)
    return finish(table, stmt.plan.desc, stmt)


_SORTABLE = frozenset(
    {
        ScalarKind.BOOL,
        ScalarKind.INT64,
        ScalarKind.TEXT,
        ScalarKind.BYTES,
        ScalarKind.DATE,
        ScalarKind.TIMESTAMP,
        ScalarKind.NUMERIC,
    }
)
"""Types Arrow orders as :func:`~spate.plan.evaluation.values.compare` does (text by code
point: UTF-8 bytewise; decimals by value). Not floats (NaN above every number, as
PostgreSQL), not intervals (stored as text), not jsonb."""


def sort_indices(
    table: pa.Table, desc: RelationDesc, order_by: Sequence[ColumnOrder]
) -> pa.Array | None:
    """The positions of ``table``'s rows in ``order_by``'s order (PostgreSQL's NULL placement,
    ties in their order in ``table``), sorted by Arrow; ``None`` when a column's type is not
    one Arrow orders as spate does."""
    if any(desc.columns[o.column].type.kind not in _SORTABLE for o in order_by):
        return None
    columns: list[pa.ChunkedArray] = []
    keys: list[tuple[str, str]] = []
    for i, o in enumerate(order_by):
        column = table.column(o.column)
        # NULLs first or last per column: a key "is NULL" ahead of the column's own
        columns.append(pc.is_null(column))
        keys.append((f"n{i}", "ascending" if o.effective_nulls_last() else "descending"))
        columns.append(column)
        keys.append((f"v{i}", "descending" if o.desc else "ascending"))
    names = [name for name, _ in keys]
    staged = pa.Table.from_arrays(columns, names=names)
    indices: pa.Array = pc.sort_indices(staged, sort_keys=keys)  # a stable sort
    return indices


def finish(table: pa.Table, desc: RelationDesc, stmt: st.Select) -> pa.Table:
    """ORDER BY (PostgreSQL NULL placement, NaN last), OFFSET, LIMIT, the output columns and
    their SQL names, applied to a read's rows."""
    width = stmt.width
    order = sort_indices(table, desc, stmt.order_by) if stmt.order_by else None
    if order is not None:  # sorted column at a time
        end = None if stmt.limit is None else stmt.offset + stmt.limit
        table = table.take(order[stmt.offset : end])
    elif stmt.order_by or stmt.offset or stmt.limit is not None:
        rows = table_rows(table, desc)
        if stmt.order_by:
            orders = stmt.order_by

            def cmp(a: Row, b: Row) -> int:
                return compare_by(orders, a, b)

            rows.sort(key=functools.cmp_to_key(cmp))
        end = None if stmt.limit is None else stmt.offset + stmt.limit
        rows = rows[stmt.offset : end]
        table = rows_table(desc, rows)
    table = to_user(table.select(list(range(width))), desc)
    return table.rename_columns(list(stmt.names))
