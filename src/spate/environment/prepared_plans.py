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

**Answered at once.** How a kept lookup, or a kept ``SELECT`` of any shape, is answered on the
calling thread when its inputs are in memory here and final is
:mod:`spate.environment.reads_at_once`.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from sqlglot.tokenizer_core import Token, TokenType

from spate.plan.expr import BinaryFunc, CallBinary, ColumnRef, Literal, ScalarExpr
from spate.plan.relation import Filter, Get, Map, Project, RelationExpr
from spate.repr.types import Datum, ScalarKind
from spate.sql import Parsed
from spate.sql import statements as st

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
    chain = linear_chain(statement.plan)
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


def linear_chain(plan: RelationExpr) -> list[Map | Filter | Project] | None:
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
    return tuple(replaced_literals(s, replace) for s in scalars)


def replaced_literals(e: ScalarExpr, replace: Mapping[int, ScalarExpr]) -> ScalarExpr:
    """``e`` with each literal whose ``id`` is in ``replace`` replaced by its expression."""
    if isinstance(e, Literal):
        return replace.get(id(e), e)
    if isinstance(e, ColumnRef):
        return e
    changes: dict[str, object] = {}
    for f in dataclasses.fields(e):  # type: ignore[arg-type]
        value = getattr(e, f.name)
        if isinstance(value, ScalarExpr):
            new = replaced_literals(value, replace)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and any(isinstance(x, ScalarExpr) for x in value):
            items = tuple(
                replaced_literals(x, replace) if isinstance(x, ScalarExpr) else x for x in value
            )
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
    reads: dict[tuple[str | None, bool], object] = dataclasses.field(
        default_factory=dict, compare=False
    )
    """Its :class:`~spate.environment.reads_at_once.HereRead` (``None``: it has none) per
    (cluster, small reads) of the sessions that ran it (kept here, typed by the module that
    makes them)."""


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


def fits(template: LookupTemplate, values: Sequence[object]) -> bool:
    """Whether ``values`` fit ``template`` (:func:`instantiate` would put them in)."""
    return fits_types(slot_types(template), values)


def slot_types(template: LookupTemplate) -> tuple[type, ...]:
    """The Python type of each of ``template``'s values (what :func:`fits_types` takes, for
    a caller that keeps it)."""
    return tuple(type(s.value) for s in template.slots)


def fits_types(types: tuple[type, ...], values: Sequence[object]) -> bool:
    """:func:`fits` of a template whose :func:`slot_types` are ``types``."""
    return (
        len(values) == len(types)
        and _fits(values)
        and all(type(v) is t for v, t in zip(values, types, strict=True))
    )


def base_get(plan: RelationExpr) -> Get:
    """The ``Get`` under a ``Map``/``Filter``/``Project`` chain (:func:`linear_chain`)."""
    node = plan
    while isinstance(node, (Map, Filter, Project)):
        node = node.input
    assert isinstance(node, Get)
    return node
