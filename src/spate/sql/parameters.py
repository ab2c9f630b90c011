"""The types of a statement's parameters (``$1``, ``$2``…), as the planner infers them.

A client that prepares a statement asks for its parameter types before it sends values
(Describe). PostgreSQL treats an undeclared parameter as a literal of unknown type: the
context it stands in decides its type (the column an INSERT writes, the column it is compared
with, the other items of an ``IN`` list, a cast ``$1::int``); a parameter no context decides
is ``text``. spate's planner does the same: while :func:`typing_parameters` is active, the
binder binds ``$n`` as a NULL of unknown type (or of its declared type), and the first
coercion of it to a type records that type (:meth:`Parameters.note`). Planning never reads
any data, so describing a statement runs nothing.

While :func:`binding_arguments` is active (SQL ``EXECUTE name (args)`` of a prepared
statement: :attr:`spate.sql.Parsed.arguments`), ``$n`` is the ``n``-th argument's expression,
cast to its parameter's type, as PostgreSQL evaluates ``EXECUTE``'s arguments: the prepared
statement is planned with them, its text is not rewritten and split again.

Outside these a parameter is refused (``42P02``): statements run with their values bound.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Final, cast

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

from spate.sql.errors import FeatureNotSupported, GroupingError, UndefinedColumn, WindowingError
from spate.sql.parse import Source, parse_sql, position
from spate.sql.types import PG_INTERVAL_VALUE, PG_TEXT, PgType


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of an ``EXECUTE``: ``source`` the expression's place in the ``EXECUTE``'s
    text (as the statement was split: parsed when the prepared statement is planned with it,
    once), ``type`` the type of the parameter it is given to (declared by ``PREPARE`` or
    inferred from the prepared statement), to which it is cast."""

    source: Source
    type: PgType


@dataclass(slots=True)
class Parameters:
    """The declared types of a statement's parameters and those planning inferred.

    ``declared[i]`` is the type of ``$(i+1)`` the client declared (``None``: undeclared). A
    declared type is never replaced; an inferred one is the first the statement demands.
    """

    declared: tuple[PgType | None, ...]
    inferred: dict[int, PgType] = field(default_factory=dict)
    highest: int = 0
    """The highest ``$n`` the statement uses."""
    arguments: tuple[exp.Expression, ...] | None = None
    """``$n`` is ``arguments[n - 1]`` cast to ``declared[n - 1]`` (an ``EXECUTE``'s
    arguments, :func:`binding_arguments`); ``None``: parameters are typed, not bound."""

    def type_of(self, n: int) -> PgType | None:
        """The type of ``$n`` known so far (``None``: unknown yet)."""
        self.highest = max(self.highest, n)
        if n <= len(self.declared) and self.declared[n - 1] is not None:
            return self.declared[n - 1]
        return self.inferred.get(n)

    def note(self, n: int, t: PgType) -> None:
        """``$n`` is used as a value of type ``t`` (kept if it is its first)."""
        if self.type_of(n) is None and t.name != "unknown":
            self.inferred[n] = PG_INTERVAL_VALUE if t.name == "interval" else t

    def types(self, count: int | None = None) -> tuple[PgType, ...]:
        """The types of ``$1`` … ``$count`` (default: the highest used or declared); a
        parameter no context typed is ``text``, as PostgreSQL resolves it."""
        n = max(self.highest, len(self.declared)) if count is None else count
        return tuple(self.type_of(i) or PG_TEXT for i in range(1, n + 1))


_CURRENT: Final[ContextVar[Parameters | None]] = ContextVar("spate_sql_parameters", default=None)


@contextmanager
def typing_parameters(declared: Sequence[PgType | None] = ()) -> Iterator[Parameters]:
    """Plan with parameters allowed; the yielded :class:`Parameters` collects their types."""
    params = Parameters(tuple(declared))
    token = _CURRENT.set(params)
    try:
        yield params
    finally:
        _CURRENT.reset(token)


@contextmanager
def binding_arguments(arguments: Sequence[Argument]) -> Iterator[Parameters]:
    """Plan with ``$n`` bound to ``arguments[n - 1]`` (an ``EXECUTE``'s arguments), each
    parsed here, once."""
    # in parentheses, as ``CAST((arg) AS type)`` reads it
    parsed = tuple(
        exp.Paren(this=_constant(parse_sql(a.source, a.source.start), a.source.text))
        for a in arguments
    )
    params = Parameters(tuple(a.type for a in arguments), arguments=parsed)
    token = _CURRENT.set(params)
    try:
        yield params
    finally:
        _CURRENT.reset(token)


def _constant(arg: exp.Expression, text: str) -> exp.Expression:
    """``arg``, an ``EXECUTE`` argument, refused as PostgreSQL refuses it when it is no
    expression of constants: it names a column (42703: an argument has no columns in scope,
    even where the prepared statement has), or holds a subquery (0A000), an aggregate (42803)
    or a window function (42P20)."""
    for found in arg.walk():
        node = cast(exp.Expression, found)
        if isinstance(node, exp.Column):
            raise UndefinedColumn(
                f'column "{node.name}" does not exist', position=position(node), text=text
            )
        if isinstance(node, (exp.Subquery, exp.Select)):
            raise FeatureNotSupported(
                "cannot use subquery in EXECUTE parameter", position=position(node), text=text
            )
        if isinstance(node, exp.Window):
            raise WindowingError(
                "window functions are not allowed in EXECUTE parameters",
                position=position(node),
                text=text,
            )
        if isinstance(node, exp.AggFunc):
            raise GroupingError(
                "aggregate functions are not allowed in EXECUTE parameters",
                position=position(node),
                text=text,
            )
    return arg


@contextmanager
def no_parameters() -> Iterator[None]:
    """Plan with parameters refused (an ``EXECUTE``'s argument: it has none of its own)."""
    token = _CURRENT.set(None)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> Parameters | None:
    """The parameters being typed (``None``: parameters are not allowed here)."""
    return _CURRENT.get()


def highest_parameter(tokens: Sequence[Token]) -> int:
    """The highest ``n`` of a parameter ``$n`` among a statement's tokens (0: none)."""
    highest = 0
    for tok, nxt in itertools.pairwise(tokens):
        if (
            tok.token_type is TokenType.PARAMETER
            and nxt.token_type is TokenType.NUMBER
            and nxt.text.isdigit()
            and tok.end + 1 == nxt.start
        ):
            highest = max(highest, int(nxt.text))
    return highest
