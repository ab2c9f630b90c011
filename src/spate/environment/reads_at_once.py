"""Reads answered at once, on the calling thread, from contents this process holds in memory.

A read whose inputs' persisted contents are cached here and final at the read's timestamp
needs no worker thread, no read hold and no trip to the environment's loop: it is evaluated
where it is asked (a pgwire session's loop). Two kinds of kept plans are read so:

* **a kept lookup** (a prepared statement's
  :class:`~spate.environment.prepared_plans.LookupTemplate`): its plan compiled once as a
  :class:`Probe` whose parameters are inputs, run on the rows of the looked-up key in an index
  of the shard's contents by that column (:func:`read_at_once`);
* **a kept ``SELECT`` of any other shape** (a join, an aggregate, a subquery:
  :class:`HereRead`), evaluated over its inputs' cached contents, its last answer given again
  while those contents are the same (:func:`answer_at_once`).

Both read at the timestamp :func:`spate.environment.reads.select` would pick
(:func:`_read_timestamp`), and both refuse (``None``: the caller reads as usual, with the same
answer or error) whatever needs I/O or a wait, a materialized view whose errors shard may hold
an error there, and a plan that fails on the rows.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar, cast

import pyarrow as pa

from spate.environment import lookup, read_plan, small_reads
from spate.environment.catalog import MaterializedViewItem, SubsourceItem, TableItem
from spate.environment.prepared_plans import (
    LookupTemplate,
    base_get,
    linear_chain,
    replaced_literals,
)
from spate.environment.reads import rows_table
from spate.environment.runtime import Runtime
from spate.environment.small_reads import VECTORISED_FACTOR, vectorised
from spate.errors import EvalError
from spate.ids import GlobalId, ShardId
from spate.persist.error_shard import errors_shard
from spate.persist.state import ShardState
from spate.plan.evaluation.relation import Multiset, TooLarge, evaluate
from spate.plan.evaluation.scalar import Evaluator, compile_scalar
from spate.plan.evaluation.values import canonical, canonical_row
from spate.plan.evaluation.vectorized import CompiledPlan
from spate.plan.expr import BinaryFunc, CallBinary, ColumnRef, Literal, Now, ScalarExpr
from spate.plan.relation import Filter, Get, Map, RelationExpr
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import Datum, Row, ScalarKind, ScalarType
from spate.sql import statements as st

_log: Final = logging.getLogger("spate.environment.reads_at_once")

_NO_LIMIT: Final = 2**63


# -- kept lookups read at once --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Keep:
    """A ``Filter``: the rows on which every predicate is true."""

    predicates: tuple[Evaluator, ...]


@dataclass(frozen=True, slots=True)
class _Compute:
    """A ``Map``: each scalar (of its type) appended in turn."""

    scalars: tuple[tuple[Evaluator, ScalarType], ...]


_Step = _Keep | _Compute | tuple[int, ...]
"""A step of a :class:`Probe` (a ``Project``: its outputs)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """A template's plan compiled once, its parameters' values given to it as inputs: the
    rows a ``Map``/``Filter``/``Project`` chain keeps of the rows of ``base`` whose
    ``column`` is the value of parameter ``slot`` (a superset of the rows it keeps: the plan
    has the conjunct ``column = $(slot+1)``, both of one type), without planning, putting the
    values in or compiling anything again (:func:`run_probe`)."""

    template: LookupTemplate
    base: Get
    column: int
    slot: int
    steps: tuple[_Step, ...]
    """The chain bottom up; each expression evaluated on a row followed by the values."""
    pure: bool = False
    """Whether the rows kept of a looked-up value's base rows are a function of those rows
    alone (every step a ``Project``: no value of a parameter, nor the time, is read)."""


def make_probe(template: LookupTemplate) -> Probe | None:
    """The :class:`Probe` of ``template``, or ``None`` when no parameter is compared with a
    column of the base as a whole conjunct, both of one type."""
    plan = template.statement.plan
    chain = linear_chain(plan)
    if chain is None:
        return None
    base = base_get(plan)
    slots = {id(s): i for i, s in enumerate(template.slots)}
    params = [Column(f"${i + 1}", s.type, False) for i, s in enumerate(template.slots)]
    mapping: list[int | None] = list(range(base.desc.arity))  # position -> base column
    key: tuple[int, int, ScalarExpr] | None = None
    steps: list[_Step] = []
    for node in reversed(chain):
        width = node.input.desc.arity
        if isinstance(node, Filter):
            found = None
            if key is None:
                key = found = _key_slot(node.predicates, slots, mapping, base, template.slots)
            replace = _parameters(template.slots, width)
            columns = [*node.input.desc.columns, *params]
            kept = tuple(
                compile_scalar(replaced_literals(p, replace), columns)
                for p in node.predicates
                if found is None or p is not found[2] or not _exact_key(base, found[0])
            )
            if kept:
                steps.append(_Keep(kept))
        elif isinstance(node, Map):
            compiled = []
            for j, scalar in enumerate(node.scalars):
                visible = list(node.desc.columns[: width + j])
                expr = replaced_literals(scalar, _parameters(template.slots, width + j))
                compiled.append(
                    (compile_scalar(expr, [*visible, *params]), node.desc.columns[width + j].type)
                )
            steps.append(_Compute(tuple(compiled)))
            mapping = mapping + [None] * len(node.scalars)
        else:
            steps.append(node.outputs)
            mapping = [mapping[o] for o in node.outputs]
    if key is None:
        return None
    pure = all(type(step) is tuple for step in steps)
    return Probe(template, base, key[0], key[1], tuple(steps), pure)


def _exact_key(base: Get, column: int) -> bool:
    """Whether the rows of ``base`` an index by ``column`` gives for a value (rows checked
    against their columns: :func:`base_rows`) are exactly those on which ``column = value``
    is true, for any value a template takes of that column's type: a ``bigint``, whose
    Python ``int`` is its own canonical form and equal only to itself. Such a conjunct,
    standing as a whole predicate, is not evaluated again on the rows looked up."""
    return base.desc.columns[column].type.kind is ScalarKind.INT64


def _parameters(slots: Sequence[Literal], width: int) -> dict[int, ScalarExpr]:
    """Each slot's literal as a reference to its value, after ``width`` columns."""
    return {id(s): ColumnRef(width + i) for i, s in enumerate(slots)}


def _key_slot(
    predicates: Sequence[ScalarExpr],
    slots: Mapping[int, int],
    mapping: Sequence[int | None],
    base: Get,
    literals: Sequence[Literal],
) -> tuple[int, int, ScalarExpr] | None:
    """``(base column, slot, conjunct)`` of a conjunct ``column = slot`` of ``predicates``
    (either side) whose column is a column of the base of the slot's type."""
    for p in predicates:
        for conjunct in lookup.conjuncts(p):
            if not (isinstance(conjunct, CallBinary) and conjunct.func is BinaryFunc.EQ):
                continue
            for ref, lit in ((conjunct.left, conjunct.right), (conjunct.right, conjunct.left)):
                if not (isinstance(ref, ColumnRef) and id(lit) in slots):
                    continue
                column = mapping[ref.index] if ref.index < len(mapping) else None
                slot = slots[id(lit)]
                if column is not None and base.desc.columns[column].type == literals[slot].type:
                    return column, slot, conjunct
    return None


def run_probe(
    probe: Probe, rows: Multiset, values: Sequence[object], now: int
) -> list[tuple[Row, int]]:
    """The rows ``probe``'s plan keeps of ``rows`` (rows of its base with the looked-up
    value) and their counts, with ``values`` as its parameters' values, as
    :func:`~spate.plan.evaluation.relation.evaluate` gives them; raises what it raises
    (:class:`EvalError`)."""
    return run_steps(probe, base_rows(probe, rows), values, now)


def base_rows(probe: Probe, rows: Multiset) -> list[tuple[Row, int]]:
    """``rows`` (of ``probe``'s base) checked against its columns, each value in its
    canonical form, with their counts: what :func:`run_steps` takes."""
    desc = probe.base.desc
    current: list[tuple[Row, int]] = []
    for i, (row, m) in enumerate(rows.items()):
        desc.validate_row(row, collection=str(probe.base.id), row_index=i)
        current.append((canonical_row(tuple(row), desc.columns), m))
    return current


def run_steps(
    probe: Probe, current: list[tuple[Row, int]], values: Sequence[object], now: int
) -> list[tuple[Row, int]]:
    """:func:`run_probe` of rows :func:`base_rows` gave (not changed)."""
    params = cast(Row, tuple(values))
    for step in probe.steps:
        if isinstance(step, _Keep):
            predicates = step.predicates
            current = [
                (r, m) for r, m in current if all(p(r + params, now) is True for p in predicates)
            ]
        elif isinstance(step, _Compute):
            out = []
            for r, m in current:
                row = r
                for fn, t in step.scalars:
                    row = (*row, canonical(fn(row + params, now), t))
                out.append((row, m))
            current = out
        else:
            current = [(tuple(r[o] for o in step), m) for r, m in current]
    if len(current) <= 1:  # nothing to consolidate (a key lookup's usual answer)
        return [(r, m) for r, m in current if m != 0]
    counts: Multiset = Counter()
    for r, m in current:
        counts[r] += m
    return [(r, m) for r, m in counts.items() if m != 0]


class LastFound:
    """What the last at-once reads of templates of one shape (:func:`_shared_last`: every
    session's executions of a prepared lookup) found, each attribute replaced whole (safe
    from any thread), each used again while the state seen last is the same object and the
    timestamp is one it is valid for: ``index``, the contents of the item's shard by the
    probe's column; ``no_errors``, the errors shard's state seen last with the first
    timestamp at which it may hold an error; ``rows``, for ``index``'s contents, each
    looked-up key's rows as :func:`base_rows` gives them (the contents never change: neither
    do they)."""

    __slots__ = ("index", "no_errors", "rows")

    def __init__(self) -> None:
        self.index: small_reads.SeenIndex | None = None
        self.no_errors: tuple[ShardState, int] | None = None
        self.rows: tuple[dict[Datum, Multiset], dict[Datum, list[tuple[Row, int]]]] | None = None


_SHARED: Final[weakref.WeakKeyDictionary[object, dict[tuple[object, ...], LastFound]]] = (
    weakref.WeakKeyDictionary()
)
"""Per environment (its persist client), the :class:`LastFound` of every template whose
at-once reads find the same things: all sessions' executions of one prepared lookup share
what their reads found (the shard's index, the keys' rows)."""
_SHARED_LOCK: Final = threading.Lock()
_SHARED_MAX: Final = 1024
"""Shapes of reads kept per environment (beyond it, all go: a cache)."""


def _shared_last(rt: Runtime, shard: ShardId, errors: ShardId | None, probe: Probe) -> LastFound:
    """The :class:`LastFound` shared by at-once reads of ``shard`` (and its ``errors`` shard)
    through ``probe``'s column whose kept rows per key are the same: a
    :attr:`~Probe.pure` probe's are its projections of the base rows; another's, the base
    rows themselves (:func:`base_rows` of the base's columns)."""
    shape = (shard, errors, probe.column, probe.base.desc, probe.steps if probe.pure else None)
    with _SHARED_LOCK:
        by_shape = _SHARED.get(rt.persist)
        if by_shape is None:
            by_shape = _SHARED[rt.persist] = {}
        found = by_shape.get(shape)
        if found is None:
            if len(by_shape) >= _SHARED_MAX:
                by_shape.clear()
            found = by_shape[shape] = LastFound()
        return found


@dataclass(frozen=True, slots=True)
class AtOnce:
    """Whether executions of a template, run by a session on ``cluster`` with
    ``small_reads``, can be read at once (:func:`read_at_once`): ``probe`` reads them when
    the read route of the template's plan reads the persisted contents here of a table or
    materialized view (an index lookup or a persist read, at most ``limit`` updates; ``None``:
    any), through an index of them by the column the probe looks up (``item`` is ``None``:
    they cannot). Valid while the catalog is the template's (by identity)."""

    template: LookupTemplate
    cluster: str | None
    small_reads: bool
    item: TableItem | MaterializedViewItem | None
    probe: Probe | None
    limit: int | None = None
    shard: ShardId | None = None
    """``item``'s shard (a collection's never changes)."""
    errors: ShardId | None = None
    """The errors shard of ``item``, a materialized view."""
    last: LastFound = dataclasses.field(default_factory=LastFound, compare=False)
    """What the last reads found (a cache, :class:`LastFound`)."""
    seen: Callable[[], ShardState | None] | None = dataclasses.field(default=None, compare=False)
    """The state of ``shard`` this process saw last (``PersistClient.seen_states``)."""
    errors_seen: Callable[[], ShardState | None] | None = dataclasses.field(
        default=None, compare=False
    )
    """The state of ``errors`` this process saw last."""


def at_once(
    rt: Runtime, template: LookupTemplate, *, cluster: str | None, small_reads: bool
) -> AtOnce:
    """The :class:`AtOnce` of ``template`` (its route chosen once, from the catalog now,
    which MUST be the template's)."""
    stmt = template.statement
    route = read_plan.plan_read(rt, stmt.plan, cluster, small_reads=small_reads)
    probe = make_probe(template) if stmt.as_of is None else None
    here: tuple[GlobalId, int | None] | None = None
    if probe is None:
        pass
    elif isinstance(route, read_plan.FastPathLookup):
        if route.here_up_to > 0 and route.only is not None and route.only[0] == probe.column:
            here = route.base.id, route.here_up_to
    elif (
        isinstance(route, read_plan.PersistRead)
        and route.may_read_here
        and route.only is not None
        and route.only[0] == probe.column
    ):
        here = route.base.id, route.here_up_to if route.cluster is not None else None
    if here is not None:
        assert probe is not None
        found = rt.catalog.find_id(here[0])
        if isinstance(found, (TableItem, MaterializedViewItem)):
            shard = rt.storage.collection_metadata(found.id).shard
            errors = errors_shard(shard) if isinstance(found, MaterializedViewItem) else None
            return AtOnce(
                template,
                cluster,
                small_reads,
                found,
                probe,
                here[1],
                shard,
                errors,
                last=_shared_last(rt, shard, errors, probe),
                seen=rt.persist.seen_states(shard),
                errors_seen=None if errors is None else rt.persist.seen_states(errors),
            )
    return AtOnce(template, cluster, small_reads, None, None)


def read_at_once(
    rt: Runtime, kept: AtOnce, values: Sequence[object], *, isolation: str
) -> list[tuple[Row, int]] | None:
    """The rows of an execution with ``values`` of the template ``kept`` belongs to (a
    lookup of ``kept.item``; the values fit the template) and their counts, read now on the
    calling thread (any thread), or ``None`` when that needs I/O or a wait, or the plan
    fails on the rows (the caller reads it as any read: the answer, or the error, is the
    same).

    The read's timestamp is the one :func:`spate.environment.reads.select` picks for a read
    of ``kept.item`` at ``isolation`` (strict serializable: at or past every write
    acknowledged before this call; serializable: the latest time it has completed; never
    before its since). Its rows are answered only from the shard's state this process saw
    last when that state's upper is past the timestamp (the contents there are final) and the
    looked-up rows of it are cached here (:func:`~spate.environment.small_reads.lookup_seen`),
    and, for a materialized view, its errors shard seen last holds no error up to the
    timestamp. No read hold is taken: the rows are in memory and final at the timestamp, and
    nothing is fetched (a hold keeps the blobs a read fetches). Reads only values the
    environment's loop replaces whole (the catalog, frontiers, states seen): safe from another
    thread."""
    item, probe = kept.item, kept.probe
    if item is None or probe is None:
        return None
    limit = _NO_LIMIT if kept.limit is None else rt.settings.small_read_updates
    if limit <= 0:
        return None
    ts = _timestamp_of(rt, item.id, isolation)
    if ts is None:
        return None
    assert kept.shard is not None
    index = _seen_index(rt, kept, ts, limit, probe.column)
    if index is None:
        return None
    if kept.errors is not None and not _no_errors(rt, kept, kept.errors, ts):
        return None
    key = cast(Datum, values[probe.slot])
    kept_rows = kept.last.rows
    if kept_rows is None or kept_rows[0] is not index:
        kept_rows = kept.last.rows = (index, {})
    by_key = kept_rows[1]
    pure = probe.pure
    base = by_key.get(key)
    if base is None:
        base = base_rows(probe, index.get(key, _NONE))
        if pure:  # its answer, the same list for the same key while the contents are these
            base = run_steps(probe, base, values, 0)
        if len(by_key) < _KEPT_KEYS:
            by_key[key] = base
    if pure:
        return base
    try:
        return run_steps(probe, base, values, rt.oracle.read_ts())
    except EvalError:  # the read reports it, naming what it read
        return None


_NONE: Final[Multiset] = Counter()
_KEPT_KEYS: Final = 100_000
"""Keys whose checked rows (:func:`base_rows`) are kept per contents read at once: the
rows kept of them (:func:`run_steps`) where the probe is :attr:`~Probe.pure`."""


def _seen_index(
    rt: Runtime, kept: AtOnce, ts: int, limit: int, column: int
) -> dict[Datum, Multiset] | None:
    """:func:`~spate.environment.small_reads.seen_index` of ``kept``'s shard at ``ts``:
    the last one found, while the shard's state seen last is the one it was found in and
    ``ts`` is a timestamp it holds for."""
    assert kept.shard is not None
    last = kept.last.index
    if (
        last is not None
        and last.lo <= ts < last.hi
        and last.updates <= limit
        and (kept.seen() if kept.seen is not None else rt.persist.seen_state(kept.shard))
        is last.state
    ):
        return last.index
    found = small_reads.seen_index(rt, kept.shard, ts, limit, column)
    if found is None:
        return None
    kept.last.index = found
    return found.index


def _no_errors(rt: Runtime, kept: AtOnce, shard: ShardId, ts: int) -> bool:
    """:func:`_no_errors_until` of ``shard`` at ``ts``, kept in ``kept.last``."""
    found = _no_errors_until(rt, shard, ts, kept.last.no_errors, kept.errors_seen)
    if found is not None:
        kept.last.no_errors = found
    return found is not None


def _no_errors_until(
    rt: Runtime,
    shard: ShardId,
    ts: int,
    last: tuple[ShardState, int] | None,
    seen: Callable[[], ShardState | None] | None = None,
) -> tuple[ShardState, int] | None:
    """:func:`~spate.environment.small_reads.no_errors_until` of ``shard`` at ``ts``: ``last``
    (what an earlier call found) while the errors shard's state seen last (``seen()``, if
    given) is the same and ``ts`` is before its first possible error, else found again;
    ``None``: not known to hold no error up to ``ts``."""
    if last is not None and ts < last[1]:
        state = seen() if seen is not None else rt.persist.seen_state(shard)
        if state is last[0]:
            return last
    return small_reads.no_errors_until(rt, shard, ts)


# -- kept reads of any shape answered at once ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Input:
    """A collection a :class:`HereRead` reads: its shard and, for a materialized view, the
    shard of its errors."""

    id: GlobalId
    shard: ShardId
    errors: ShardId | None


@dataclass(frozen=True, slots=True)
class _Found:
    """An answer (what the caller's ``finish`` made of the plan's rows) and, per input, the
    contents it was computed from: ``seen[i]`` is replaced, whole, by a later state's
    finding of the same parts (safe from any thread: each entry is one consistent value)."""

    seen: list[small_reads.SeenContents]
    answer: object


@dataclass(slots=True)
class HereRead:
    """How a kept ``SELECT`` (its plan ``plan``, views inlined, reading ``inputs``), run by
    a session on one cluster with small reads on or off, is answered at once
    (:func:`answer_at_once`): its route reads the inputs' persisted contents here (a
    :class:`~spate.environment.read_plan.PersistRead` here or an
    :class:`~spate.environment.read_plan.InProcess` read), at most ``limit`` updates in all
    (``None``: any) while ``small_read_updates`` is ``setting``. Valid while the catalog is
    the one the statement was planned against (the caller's to check)."""

    plan: RelationExpr
    inputs: tuple[_Input, ...]
    limit: int | None
    setting: int
    compiled: CompiledPlan | None
    last: _Found | None = None
    """The last answer computed (a cache; replaced whole)."""
    no_errors: dict[ShardId, tuple[ShardState, int]] = dataclasses.field(default_factory=dict)
    """Per errors shard, its state seen last and the first timestamp at which that state may
    hold an error (:func:`~spate.environment.small_reads.no_errors_until`)."""


_READABLE: Final = (TableItem, SubsourceItem, MaterializedViewItem)


def here_read(
    rt: Runtime, stmt: st.Select, *, cluster: str | None, small_reads: bool
) -> HereRead | None:
    """The :class:`HereRead` of ``stmt`` read by a session on ``cluster`` with
    ``small_reads`` (its route chosen from the catalog now, which MUST be the one ``stmt``
    was planned against), or ``None`` when it cannot be answered at once: an ``AS OF``, an
    interval column, a plan that reads the time (``now()``, ``mz_now()``: its answer is not
    a function of its inputs' contents alone), a route that reads no persisted contents
    here (an index peek, a dataflow, a constant)."""
    plan = stmt.plan
    if stmt.as_of is not None or _has_interval(plan) or _reads_time(plan):
        return None
    setting = rt.settings.small_read_updates
    if setting <= 0:
        return None
    route = read_plan.plan_read(rt, plan, cluster, small_reads=small_reads)
    limit: int | None
    if isinstance(route, read_plan.PersistRead):
        if not route.may_read_here:
            return None
        evaluated = route.plan
        compiled = vectorised(evaluated)
        limit = route.here_up_to if route.cluster is not None else None
    elif isinstance(route, read_plan.InProcess):
        evaluated = route.plan
        compiled = vectorised(evaluated)
        limit = route.up_to * (VECTORISED_FACTOR if compiled else 1)
    else:
        return None
    inputs = []
    for id in sorted(evaluated.depends_on()):
        item = rt.catalog.find_id(id)
        if not isinstance(item, _READABLE):
            return None
        shard = rt.storage.collection_metadata(id).shard
        errors = errors_shard(shard) if isinstance(item, MaterializedViewItem) else None
        inputs.append(_Input(id, shard, errors))
    if not inputs:
        return None
    return HereRead(evaluated, tuple(inputs), limit, setting, compiled)


def _has_interval(plan: RelationExpr) -> bool:
    return any(c.type.kind is ScalarKind.INTERVAL for c in plan.desc.columns)


def _reads_time(node: object) -> bool:
    """Whether a plan holds :class:`Now` anywhere (in any expression of any node: its
    scalars, predicates, aggregates …)."""
    if isinstance(node, Now):
        return True
    if isinstance(node, (tuple, list)):
        return any(_reads_time(x) for x in node)
    if isinstance(node, (RelationDesc, ScalarType, type)):
        return False
    if dataclasses.is_dataclass(node):
        return any(_reads_time(getattr(node, f.name)) for f in dataclasses.fields(node))
    return False


_T = TypeVar("_T")


def answer_at_once(
    rt: Runtime, here: HereRead, isolation: str, finish: Callable[[pa.Table], _T]
) -> _T | None:
    """The answer of a read of ``here``'s plan, read now on the calling thread (any thread):
    ``finish`` of its rows (a table of ``data_schema(plan.desc)``, each row repeated as often
    as it occurs), or ``None`` when that needs I/O or a wait, the inputs are too large or the
    plan fails on them (the caller reads it as any read: the answer, or the error, is the
    same).

    The read's timestamp is the one :func:`spate.environment.reads.select` picks for a read
    of the inputs at ``isolation`` (strict serializable: at or past every write acknowledged
    before this call; serializable: the latest time they all have completed; never before a
    since). Each input's contents there are taken from its shard's state this process saw
    last when that state's upper is past the timestamp (final there) and they are cached
    here (:func:`~spate.environment.small_reads.seen_contents`,
    :func:`~spate.environment.small_reads.cached_contents`); a materialized view's errors
    shard seen last must hold no error up to it. The plan reads nothing but its inputs (no
    time: :func:`here_read`), so its answer is a function of their contents: the last answer
    is given again, without evaluating anything, while every input has the same contents
    (the same parts) at the timestamp (an answer of at most :data:`KEPT_ANSWER_ROWS` rows
    is kept); otherwise the plan is evaluated here, over at most
    :data:`~spate.environment.small_reads.LOOP_ROWS` rows, and ``finish`` applied (by the
    vectorised evaluator when it covers the plan, else by rows). No read hold is taken: the
    contents are in memory and final, and nothing is fetched."""
    if rt.settings.small_read_updates != here.setting:
        return None
    ts = _read_timestamp(rt, [inp.id for inp in here.inputs], isolation)
    if ts is None:
        return None
    for inp in here.inputs:
        if inp.errors is not None and not _no_errors_here(rt, here, inp.errors, ts):
            return None
    last = here.last
    if last is not None and _same_contents(rt, here, last, ts):
        return cast(_T, last.answer)
    seen = []
    for inp in here.inputs:
        found = small_reads.seen_contents(rt, inp.shard, ts)
        if found is None:
            return None
        seen.append(found)
    if here.limit is not None and sum(s.updates for s in seen) > here.limit:
        return None
    table = _evaluate_here(rt, here, seen, ts)
    if table is None:
        return None
    answer = finish(table)
    if table.num_rows <= KEPT_ANSWER_ROWS:
        here.last = _Found(seen, answer)
    return answer


KEPT_ANSWER_ROWS: Final = 10_000
"""An answer of more rows than this (before ORDER BY/LIMIT) is not kept: it is computed
again at every execution (a kept plan keeps one answer; a few hundred plans are kept)."""


def _read_timestamp(rt: Runtime, ids: Sequence[GlobalId], isolation: str) -> int | None:
    """The timestamp :func:`spate.environment.reads.select` picks for a read of the
    collections ``ids`` at ``isolation`` now (no ``AS OF``); ``None`` when one is gone or has
    no since."""
    if len(ids) == 1:
        return _timestamp_of(rt, ids[0], isolation)
    latest_since = 0
    complete: list[int] = []
    for gid in ids:
        found = _since_upper(rt, gid)
        if found is None:
            return None
        since, upper = found
        latest_since = max(latest_since, since)
        if upper is not None:
            complete.append(upper - 1)
    if isolation == "serializable":
        freshest = min(complete) if complete else rt.oracle.read_ts()
        return max(freshest, latest_since)
    if isolation != "strict serializable":
        return None
    return max(rt.oracle.read_ts(), latest_since)


def _since_upper(rt: Runtime, gid: GlobalId) -> tuple[int, int | None] | None:
    """The since and upper of collection ``gid`` (the upper ``None`` when empty); ``None``
    when it is gone (dropped meanwhile: the read says so) or has no since."""
    try:
        frontiers = rt.storage.collection_frontiers(gid)
    except LookupError:
        return None
    since = frontiers.since.as_option()
    if since is None:
        return None
    return since, frontiers.upper.as_option()


def _timestamp_of(rt: Runtime, gid: GlobalId, isolation: str) -> int | None:
    """:func:`_read_timestamp` of the one collection ``gid``."""
    found = _since_upper(rt, gid)
    if found is None:
        return None
    since, upper = found
    if isolation == "strict serializable":
        return max(rt.oracle.read_ts(), since)
    if isolation != "serializable":
        return None
    return max(rt.oracle.read_ts() if upper is None else upper - 1, since)


def _same_contents(rt: Runtime, here: HereRead, last: _Found, ts: int) -> bool:
    """Whether every input of ``here`` has at ``ts`` the contents ``last`` was computed
    from, final in the state seen last (``last.seen`` updated to that state's finding)."""
    for i, inp in enumerate(here.inputs):
        before = last.seen[i]
        if rt.persist.seen_state(inp.shard) is before.state and before.lo <= ts < before.hi:
            continue
        now = small_reads.seen_contents(rt, inp.shard, ts)
        if now is None or now.key != before.key:
            return False
        last.seen[i] = now
    return True


def _no_errors_here(rt: Runtime, here: HereRead, shard: ShardId, ts: int) -> bool:
    """:func:`_no_errors_until` of ``shard`` at ``ts``, kept in ``here.no_errors``."""
    found = _no_errors_until(rt, shard, ts, here.no_errors.get(shard))
    if found is not None:
        here.no_errors[shard] = found
    return found is not None


def _evaluate_here(
    rt: Runtime, here: HereRead, seen: Sequence[small_reads.SeenContents], ts: int
) -> pa.Table | None:
    """``here``'s plan over the inputs' cached contents ``seen`` found (at most
    :data:`~spate.environment.small_reads.LOOP_ROWS` rows), or ``None``."""
    plan = here.plan
    if here.compiled is not None:
        tables: dict[GlobalId, pa.Table] = {}
        for inp, s in zip(here.inputs, seen, strict=True):
            table = small_reads.cached_contents(rt, inp.id, s, arrow=True)
            if not isinstance(table, pa.Table):
                return None
            tables[inp.id] = table
        if sum(t.num_rows for t in tables.values()) > small_reads.LOOP_ROWS:
            return None
        found = small_reads.evaluate_tables(plan, tables, here.compiled)
        if found is not None:
            return found
    inputs: dict[GlobalId, Multiset] = {}
    for inp, s in zip(here.inputs, seen, strict=True):
        rows = small_reads.cached_contents(rt, inp.id, s, arrow=False)
        if rows is None or isinstance(rows, pa.Table):
            return None
        inputs[inp.id] = rows
    if sum(len(c) for c in inputs.values()) > small_reads.LOOP_ROWS:
        return None
    try:
        counts = evaluate(plan, inputs, ts, max_rows=small_reads.MAX_INTERMEDIATE_ROWS)
    except (EvalError, TooLarge, RecursionError):  # the read reports it as it should
        return None
    except Exception:  # an evaluator bug must not fail a read the usual way answers
        _log.warning("evaluating a kept read at once failed; reading it as usual", exc_info=True)
        return None
    return rows_table(plan.desc, [r for r, n in counts.items() for _ in range(n)])
