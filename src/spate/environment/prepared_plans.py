"""Plans kept per prepared statement: an ``Execute`` of a prepared lookup is not planned again.

A client that prepares ``SELECT … FROM t WHERE k = $1`` and executes it many times would have
each execution's text (its values bound as literals) parsed and planned anew. A
:class:`LookupTemplate` keeps the planned statement of one execution and where each parameter's
value went in it (the one :class:`~spate.plan.expr.Literal` it became); a later execution is the
template with its own values put in those places, planned by nobody.

**When the template is the plan.** Only for statements where putting another value in place of
a literal is exactly what planning the other value's text would give:

* the statement is a ``SELECT`` whose every parameter occurs once, as ``column = $n`` (or
  ``$n = column``) standing as a whole conjunct (:func:`parameters_are_keys`): the planner
  folds nothing of such a comparison, whatever the value;
* its plan is ``Map``/``Filter``/``Project`` over one ``Get`` (what an index lookup reads), and
  each value is found exactly once in it, as a literal of the value's own Python type
  (``int`` for ``int64``, ``str`` for ``text``) compared with a column; a value the planner
  converted, or found twice, or not at all, makes no template;
* a later execution's value must be of that same type and not NULL (``= NULL`` folds: such
  an execution is planned as usual), an ``int`` within 64 bits.

**Invalidation.** A template belongs to the catalog state it was planned against (the
environment's ``runtime.catalog``, a new object after every catalog change: DDL, a rename, a
comment): once the catalog is another, the template is not used and the next execution plans
again. Nothing else a plan depends on changes without the catalog changing (the read route,
which depends on replicas and hydration, is chosen again at every execution).

**Answered at once.** A kept lookup whose rows are in memory here and final at the read's
timestamp is answered on the calling thread (:func:`read_at_once`); so is a kept ``SELECT``
of any other shape (a join, an aggregate, a subquery: :class:`HereRead`) whose inputs'
contents are cached here and final at the timestamp (:func:`answer_at_once`), its last answer
given again while those contents are the same.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar, cast

import pyarrow as pa
from sqlglot.tokenizer_core import Token, TokenType

from spate.environment import lookup, read_plan, small_reads
from spate.environment.catalog import MaterializedViewItem, SubsourceItem, TableItem
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
from spate.plan.relation import Filter, Get, Map, Project, RelationExpr
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import Datum, Row, ScalarKind, ScalarType
from spate.sql import Parsed
from spate.sql import statements as st

_log: Final = logging.getLogger("spate.environment.prepared_plans")

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_NO_LIMIT: Final = 2**63

_KINDS: Final[dict[type, ScalarKind]] = {int: ScalarKind.INT64, str: ScalarKind.TEXT}
"""The Python types of values a template takes, and the literal kind each must have become."""

_END_OF_CONJUNCT: Final = frozenset(
    {TokenType.AND, TokenType.ORDER_BY, TokenType.LIMIT, TokenType.SEMICOLON, TokenType.OFFSET}
)
_COLUMN: Final = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
_BEFORE_CONJUNCT: Final = frozenset({TokenType.WHERE, TokenType.AND})


@dataclass(frozen=True, slots=True)
class LookupTemplate:
    """The planned ``statement`` of a prepared statement and, for each parameter ``$(i+1)``,
    ``slots[i]``: the literal its value became in ``statement.plan``. Valid while the
    environment's catalog is ``catalog`` (compared by identity)."""

    catalog: object
    statement: st.Select
    slots: tuple[Literal, ...]


@dataclass(frozen=True, slots=True)
class NoTemplate:
    """The statement makes no template against ``catalog`` (it is planned every time)."""

    catalog: object


Cached = LookupTemplate | NoTemplate


def parameters_are_keys(parsed: Parsed, count: int) -> bool:
    """Whether ``parsed`` is a ``SELECT`` whose parameters ``$1`` … ``$count`` each occur
    exactly once, as a whole conjunct ``column = $n`` or ``$n = column`` of its ``WHERE``."""
    tokens = parsed.tokens
    if count < 1 or not tokens or tokens[0].token_type is not TokenType.SELECT:
        return False
    seen: set[int] = set()
    for i, (tok, nxt) in enumerate(itertools.pairwise(tokens)):
        if tok.token_type is not TokenType.PARAMETER:
            continue
        if nxt.token_type is not TokenType.NUMBER or not nxt.text.isdigit():
            return False
        n = int(nxt.text)
        if n in seen or not 1 <= n <= count or not _key_conjunct(tokens, i):
            return False
        seen.add(n)
    return len(seen) == count


def _key_conjunct(tokens: Sequence[Token], at: int) -> bool:
    """``tokens[at]`` (a ``$``, its number next) stands as ``column = $n`` or ``$n = column``
    between ``WHERE``/``AND`` and ``AND``/``ORDER BY``/``LIMIT``/``OFFSET``/the end."""

    def kind(i: int) -> TokenType | None:
        return tokens[i].token_type if 0 <= i < len(tokens) else None

    def column_ending_at(i: int) -> int | None:
        """Where a column reference (``c`` or ``t.c``) ending at ``i`` starts."""
        if kind(i) not in _COLUMN:
            return None
        if kind(i - 1) is TokenType.DOT and kind(i - 2) in _COLUMN:
            return i - 2
        return i

    def ends_conjunct(i: int) -> bool:
        return i >= len(tokens) or kind(i) in _END_OF_CONJUNCT

    if kind(at - 1) is TokenType.EQ:  # column = $n
        start = column_ending_at(at - 2)
        return start is not None and kind(start - 1) in _BEFORE_CONJUNCT and ends_conjunct(at + 2)
    if kind(at + 2) is TokenType.EQ and kind(at - 1) in _BEFORE_CONJUNCT:  # $n = column
        end = at + 3
        if kind(end + 1) is TokenType.DOT:
            end += 2
        return column_ending_at(end) is not None and ends_conjunct(end + 1)
    return False


def make_template(catalog: object, statement: st.Statement, values: Sequence[object]) -> Cached:
    """The template of ``statement`` (planned against ``catalog`` from a text with ``values``
    bound, a statement :func:`parameters_are_keys` accepted), or :class:`NoTemplate`."""
    if not isinstance(statement, st.Select) or not _fits(values):
        return NoTemplate(catalog)
    chain = _chain(statement.plan)
    if chain is None:
        return NoTemplate(catalog)
    found: list[list[Literal]] = [[] for _ in values]
    for node in chain:
        scalars = node.predicates if isinstance(node, Filter) else ()
        if isinstance(node, Map):
            scalars = node.scalars
        for literal, compared in _literals(scalars):
            for i, v in enumerate(values):
                if type(literal.value) is type(v) and literal.value == v:
                    if not compared or literal.type.kind is not _KINDS[type(v)]:
                        return NoTemplate(catalog)
                    found[i].append(literal)
    if any(len(f) != 1 for f in found):
        return NoTemplate(catalog)
    slots = tuple(f[0] for f in found)
    if len({id(s) for s in slots}) != len(slots):
        return NoTemplate(catalog)
    return LookupTemplate(catalog, statement, slots)


def instantiate(
    template: LookupTemplate, values: Sequence[object], *, sql: str
) -> st.Select | None:
    """``template``'s statement with ``values`` in its slots, its text ``sql`` (the text with
    them bound); ``None`` when they do not fit it — a NULL, another type, an integer beyond 64
    bits — and the text must be planned."""
    if len(values) != len(template.slots) or not _fits(values):
        return None
    if any(type(v) is not type(s.value) for v, s in zip(values, template.slots, strict=True)):
        return None
    replace = {
        id(s): Literal(cast(Datum, v), s.type) for s, v in zip(template.slots, values, strict=True)
    }
    stmt = template.statement
    return dataclasses.replace(stmt, sql=sql, plan=_substitute(stmt.plan, replace))


def _fits(values: Sequence[object]) -> bool:
    for v in values:
        if type(v) not in _KINDS:
            return False
        if isinstance(v, int) and not _INT64_MIN <= v <= _INT64_MAX:
            return False
    return True


def _chain(plan: RelationExpr) -> list[Map | Filter | Project] | None:
    """The ``Map``/``Filter``/``Project`` nodes over the plan's one ``Get`` (top first)."""
    out: list[Map | Filter | Project] = []
    node = plan
    while isinstance(node, (Map, Filter, Project)):
        out.append(node)
        node = node.input
    return out if isinstance(node, Get) else None


def _literals(scalars: Sequence[ScalarExpr]) -> list[tuple[Literal, bool]]:
    """Every literal in ``scalars``, each with whether it is compared (``=``) with a column."""
    out: list[tuple[Literal, bool]] = []

    def walk(e: object, compared: bool) -> None:
        if isinstance(e, Literal):
            out.append((e, compared))
            return
        if isinstance(e, tuple):
            for x in e:
                walk(x, False)
            return
        if not isinstance(e, ScalarExpr):
            return
        if isinstance(e, CallBinary) and e.func is BinaryFunc.EQ:
            left, right = e.left, e.right
            walk(left, isinstance(right, ColumnRef))
            walk(right, isinstance(left, ColumnRef))
            return
        for f in dataclasses.fields(e):  # type: ignore[arg-type]
            walk(getattr(e, f.name), False)

    for s in scalars:
        walk(s, False)
    return out


def _substitute(plan: RelationExpr, replace: dict[int, Literal]) -> RelationExpr:
    """``plan`` (a chain over a ``Get``) with each literal whose id is in ``replace``
    replaced; nodes without one are kept as they are."""
    if isinstance(plan, Filter):
        return Filter(_substitute(plan.input, replace), _scalars(plan.predicates, replace))
    if isinstance(plan, Map):
        return Map(_substitute(plan.input, replace), _scalars(plan.scalars, replace), plan.names)
    if isinstance(plan, Project):
        return Project(_substitute(plan.input, replace), plan.outputs, plan.names)
    return plan


def _scalars(
    scalars: tuple[ScalarExpr, ...], replace: Mapping[int, ScalarExpr]
) -> tuple[ScalarExpr, ...]:
    return tuple(_scalar(s, replace) for s in scalars)


def _scalar(e: ScalarExpr, replace: Mapping[int, ScalarExpr]) -> ScalarExpr:
    if isinstance(e, Literal):
        return replace.get(id(e), e)
    if isinstance(e, ColumnRef):
        return e
    changes: dict[str, object] = {}
    for f in dataclasses.fields(e):  # type: ignore[arg-type]
        value = getattr(e, f.name)
        if isinstance(value, ScalarExpr):
            new = _scalar(value, replace)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and any(isinstance(x, ScalarExpr) for x in value):
            items = tuple(_scalar(x, replace) if isinstance(x, ScalarExpr) else x for x in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[f.name] = items
    return dataclasses.replace(e, **changes) if changes else e  # type: ignore[type-var]


# -- statements without parameters ---------------------------------------------------------------

_SAFE_FUNCTIONS: Final = frozenset(
    {"count", "sum", "min", "max", "avg", "coalesce", "nullif", "abs", "lower", "upper", "length"}
)
"""Functions whose value depends on their arguments only (not on the time, the session or
chance): a statement calling no other function plans the same way whenever it is planned."""

_BEFORE_PAREN: Final = frozenset(
    {
        TokenType.IN,
        TokenType.EXISTS,
        TokenType.ANY,
        TokenType.ALL,
        TokenType.SOME,
        TokenType.FROM,
        TokenType.JOIN,
        TokenType.WHERE,
        TokenType.AND,
        TokenType.OR,
        TokenType.NOT,
        TokenType.SELECT,
        TokenType.ON,
        TokenType.COMMA,
        TokenType.L_PAREN,
        TokenType.EQ,
        TokenType.NEQ,
        TokenType.LT,
        TokenType.GT,
        TokenType.LTE,
        TokenType.GTE,
        TokenType.PLUS,
        TokenType.DASH,
        TokenType.STAR,
        TokenType.SLASH,
        TokenType.ALIAS,
        TokenType.UNION,
    }
)
"""Tokens a ``(`` may follow without being a function call (a subquery, a list, grouping)."""

_NOW_WORDS: Final = frozenset({"now", "today", "tomorrow", "yesterday"})


def stable_text(parsed: Parsed) -> bool:
    """Whether ``parsed`` is a ``SELECT`` without parameters whose plan depends on nothing
    but its text and the catalog: no function but :data:`_SAFE_FUNCTIONS` (no ``now()``, no
    ``current_setting``), no ``CURRENT_…``/``LOCALTIME…``/``SESSION_USER`` keyword, no
    ``'now'``-like literal. Planned once, such a statement's plan serves while the catalog is
    the same."""
    tokens = parsed.tokens
    if not tokens or tokens[0].token_type is not TokenType.SELECT:
        return False
    for i, tok in enumerate(tokens):
        kind = tok.token_type
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if kind is TokenType.PARAMETER:
            return False
        name = kind.name
        if name.startswith(("CURRENT_", "LOCALTIME", "SESSION")):
            return False
        if kind is TokenType.STRING and tok.text.strip().lower() in _NOW_WORDS:
            return False
        called = nxt is not None and nxt.token_type is TokenType.L_PAREN
        if called and kind not in _BEFORE_PAREN and not _safe_call(tok):
            return False
    return True


def _safe_call(tok: Token) -> bool:
    return tok.token_type is TokenType.VAR and tok.text.lower() in _SAFE_FUNCTIONS


@dataclass(frozen=True, slots=True)
class KeptPlan:
    """The planned ``statement`` of a :func:`stable_text` text, valid while the catalog is
    ``catalog`` (by identity) and the session's ``recursion_limit`` is the one it was planned
    with."""

    catalog: object
    recursion_limit: int
    statement: st.Select
    reads: dict[tuple[str | None, bool], HereRead | None] = dataclasses.field(
        default_factory=dict, compare=False
    )
    """Its :class:`HereRead` (``None``: it has none) per (cluster, small reads) of the
    sessions that ran it."""


class TextPlans:
    """The plans of the last ``size`` :func:`stable_text` texts run (any session's): a text
    run again, with the catalog unchanged, is not planned again. Safe from any thread."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._plans: dict[str, KeptPlan] = {}
        self._seen: dict[str, None] = {}
        self._lock = threading.Lock()

    def again(self, sql: str) -> bool:
        """Whether ``sql`` was run before (among the last ``size`` texts): a text is kept
        from its second run on, so that a text run once is planned once."""
        with self._lock:
            if sql in self._seen:
                return True
            self._seen[sql] = None
            while len(self._seen) > self._size:
                self._seen.pop(next(iter(self._seen)))
            return False

    def get(self, sql: str, catalog: object, recursion_limit: int) -> st.Select | None:
        """The plan kept for ``sql`` if it was planned against ``catalog`` (a plan of an
        older catalog is dropped: it would only keep that catalog alive)."""
        with self._lock:
            kept = self._plans.get(sql)
            if kept is not None and kept.catalog is not catalog:
                del self._plans[sql]
                return None
        if kept is None or kept.recursion_limit != recursion_limit:
            return None
        return kept.statement

    def kept(self, sql: str, catalog: object, recursion_limit: int) -> KeptPlan | None:
        """:meth:`get`, the :class:`KeptPlan` itself."""
        with self._lock:
            kept = self._plans.get(sql)
        if kept is None or kept.catalog is not catalog or kept.recursion_limit != recursion_limit:
            return None
        return kept

    def put(self, sql: str, kept: KeptPlan) -> None:
        with self._lock:
            self._plans.pop(sql, None)
            self._plans[sql] = kept
            while len(self._plans) > self._size:
                self._plans.pop(next(iter(self._plans)))  # the oldest


# -- kept lookups read at once -------------------------------------------------------------------


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


def make_probe(template: LookupTemplate) -> Probe | None:
    """The :class:`Probe` of ``template``, or ``None`` when no parameter is compared with a
    column of the base as a whole conjunct, both of one type."""
    plan = template.statement.plan
    chain = _chain(plan)
    if chain is None:
        return None
    base = _base(plan)
    slots = {id(s): i for i, s in enumerate(template.slots)}
    params = [Column(f"${i + 1}", s.type, False) for i, s in enumerate(template.slots)]
    mapping: list[int | None] = list(range(base.desc.arity))  # position -> base column
    key: tuple[int, int] | None = None
    steps: list[_Step] = []
    for node in reversed(chain):
        width = node.input.desc.arity
        if isinstance(node, Filter):
            if key is None:
                key = _key_slot(node.predicates, slots, mapping, base, template.slots)
            replace = _parameters(template.slots, width)
            columns = [*node.input.desc.columns, *params]
            steps.append(
                _Keep(tuple(compile_scalar(_scalar(p, replace), columns) for p in node.predicates))
            )
        elif isinstance(node, Map):
            compiled = []
            for j, scalar in enumerate(node.scalars):
                visible = list(node.desc.columns[: width + j])
                expr = _scalar(scalar, _parameters(template.slots, width + j))
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
    return Probe(template, base, key[0], key[1], tuple(steps))


def _parameters(slots: Sequence[Literal], width: int) -> dict[int, ScalarExpr]:
    """Each slot's literal as a reference to its value, after ``width`` columns."""
    return {id(s): ColumnRef(width + i) for i, s in enumerate(slots)}


def _key_slot(
    predicates: Sequence[ScalarExpr],
    slots: Mapping[int, int],
    mapping: Sequence[int | None],
    base: Get,
    literals: Sequence[Literal],
) -> tuple[int, int] | None:
    """``(base column, slot)`` of a conjunct ``column = slot`` of ``predicates`` (either
    side) whose column is a column of the base of the slot's type."""
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
                    return column, slot
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
    """What the last at-once reads of a template found, each attribute replaced whole (safe
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
        found = rt.catalog.find_id(here[0])
        if isinstance(found, (TableItem, MaterializedViewItem)):
            shard = rt.storage.collection_metadata(found.id).shard
            errors = errors_shard(shard) if isinstance(found, MaterializedViewItem) else None
            return AtOnce(template, cluster, small_reads, found, probe, here[1], shard, errors)
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
    ts = _read_timestamp(rt, [item.id], isolation)
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
    base = by_key.get(key)
    if base is None:
        base = base_rows(probe, index.get(key, _NONE))
        if len(by_key) < _KEPT_KEYS:
            by_key[key] = base
    try:
        return run_steps(probe, base, values, rt.oracle.read_ts())
    except EvalError:  # the read reports it, naming what it read
        return None


_NONE: Final[Multiset] = Counter()
_KEPT_KEYS: Final = 100_000
"""Keys whose checked rows (:func:`base_rows`) are kept per contents read at once."""


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
        and rt.persist.seen_state(kept.shard) is last.state
    ):
        return last.index
    found = small_reads.seen_index(rt, kept.shard, ts, limit, column)
    if found is None:
        return None
    kept.last.index = found
    return found.index


def _no_errors(rt: Runtime, kept: AtOnce, shard: ShardId, ts: int) -> bool:
    """:func:`_no_errors_until` of ``shard`` at ``ts``, kept in ``kept.last``."""
    found = _no_errors_until(rt, shard, ts, kept.last.no_errors)
    if found is not None:
        kept.last.no_errors = found
    return found is not None


def _no_errors_until(
    rt: Runtime, shard: ShardId, ts: int, last: tuple[ShardState, int] | None
) -> tuple[ShardState, int] | None:
    """:func:`~spate.environment.small_reads.no_errors_until` of ``shard`` at ``ts``: ``last``
    (what an earlier call found) while the errors shard's state seen last is the same and
    ``ts`` is before its first possible error, else found again; ``None``: not known to hold
    no error up to ``ts``."""
    if last is not None and ts < last[1] and rt.persist.seen_state(shard) is last[0]:
        return last
    return small_reads.no_errors_until(rt, shard, ts)


def fits(template: LookupTemplate, values: Sequence[object]) -> bool:
    """Whether ``values`` fit ``template`` (:func:`instantiate` would put them in)."""
    return (
        len(values) == len(template.slots)
        and _fits(values)
        and all(type(v) is type(s.value) for v, s in zip(values, template.slots, strict=True))
    )


def _base(plan: RelationExpr) -> Get:
    node = plan
    while isinstance(node, (Map, Filter, Project)):
        node = node.input
    assert isinstance(node, Get)
    return node


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
    latest_since = 0
    complete: list[int] = []
    for gid in ids:
        try:
            frontiers = rt.storage.collection_frontiers(gid)
        except LookupError:  # dropped meanwhile: the read says so
            return None
        since = frontiers.since.as_option()
        if since is None:
            return None
        latest_since = max(latest_since, since)
        upper = frontiers.upper.as_option()
        if upper is not None:
            complete.append(upper - 1)
    if isolation == "serializable":
        freshest = min(complete) if complete else rt.oracle.read_ts()
        return max(freshest, latest_since)
    if isolation != "strict serializable":
        return None
    return max(rt.oracle.read_ts(), latest_since)


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
