"""Prepared statements and Bind: parameter values become literals in the statement's text.

spate's SQL front end takes text, so a Bind's values (text or binary, typed by the statement's
declared or described parameter types) are decoded and spliced into the statement as typed
literals (``'42'::bigint``); an untyped text value stays an untyped literal, as PostgreSQL
treats it.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from sqlglot.tokenizer_core import TokenType

from spate.pgwire import codec
from spate.pgwire import types as pgt
from spate.pgwire.engine import Described
from spate.pgwire.errors import PgError
from spate.pgwire.literals import literal
from spate.sql import Parsed

Decode = Callable[[bytes], object]
"""How a bound value's bytes become its Python value."""


@dataclass(slots=True)
class Prepared:
    sql: str
    param_oids: tuple[int, ...]
    described: Described | None = None
    parsed: Parsed | None = None
    """``sql`` as the SQL layer split it (``None``: an empty statement)."""
    plans: dict[str, object] = field(default_factory=dict)
    """What the engine keeps for this statement between executions (its plan:
    :attr:`spate.pgwire.engine.Bound.cache`); dropped with the statement."""
    plain: bool | None = None
    """Whether the statement is known to be one the engine runs whatever values are bound
    (a ``SELECT``, not a session statement); ``None``: not looked at yet."""
    numbers: frozenset[int] | None = None
    """The ``n`` of the statement's ``$n`` (``None``: not looked at yet)."""
    decoders: dict[tuple[tuple[int, ...], int, bool], tuple[Decode, ...] | None] = field(
        default_factory=dict
    )
    """:func:`value_decoders` found for Binds of each shape."""


MAX_PARAMS: Final = 65535
"""The most parameters a statement can have: the protocol counts them in an unsigned 16-bit
field (Parse, Bind, ParameterDescription)."""


def param_types(oids: tuple[int, ...], count: int) -> tuple[int, ...]:
    """``count`` parameter type oids: the declared ones, ``0`` (unknown) for the rest."""
    if count > MAX_PARAMS:
        raise PgError(
            "54023", f"${count} is beyond the {MAX_PARAMS} parameters a statement can have"
        )
    return tuple(oids[:count]) + (0,) * max(0, count - len(oids))


def _format(m: codec.Bind, i: int) -> int:
    if not m.param_formats:
        return 0
    return m.param_formats[0 if len(m.param_formats) == 1 else i]


def needs_description(stmt: Prepared, m: codec.Bind) -> bool:
    """A binary value of an undeclared type needs the type the statement gives it."""
    n = len(m.params)
    if len(m.param_formats) not in (0, 1, n):
        raise codec.MalformedMessage(f"Bind: {len(m.param_formats)} formats for {n} values")
    if stmt.described is not None:
        return False
    declared = list(stmt.param_oids) + [0] * n
    return stmt.described is None and any(declared[i] == 0 and _format(m, i) for i in range(n))


def bind_sql(stmt: Prepared, m: codec.Bind) -> str:
    """The statement's text with the Bind's values in place of ``$1``, ``$2``…"""
    return bind(stmt, m)[0]


def bind(stmt: Prepared, m: codec.Bind) -> tuple[str, tuple[object, ...]]:
    """The statement's text with the Bind's values in place of ``$1``, ``$2``…, and the
    values decoded (Python values, as :func:`spate.pgwire.types.decode_param` gives them)."""
    values, text = bind_values(stmt, m)
    return text(), values


def bind_values(stmt: Prepared, m: codec.Bind) -> tuple[tuple[object, ...], Callable[[], str]]:
    """The Bind's values decoded, and a function that makes :func:`bind`'s text of them (for
    when it is needed: a kept plan takes the values alone)."""
    n = len(m.params)
    oids = list(stmt.param_oids) + [0] * n
    if stmt.described is not None:
        oids = [o or d for o, d in zip(oids, stmt.described.param_oids + (0,) * n, strict=False)]
    values = tuple(
        pgt.decode_param(oids[i], _format(m, i), raw, i + 1) for i, raw in enumerate(m.params)
    )

    def text() -> str:
        literals = [literal(v, cast_name(pgt.BY_OID.get(oids[i]))) for i, v in enumerate(values)]
        return bind_text(stmt, literals, what="bind message")

    return values, text


def value_decoders(stmt: Prepared, m: codec.Bind) -> tuple[Decode, ...] | None:
    """How each of the Bind's values (none NULL) becomes what :func:`bind_values` makes of
    it (the same decoders; a value they refuse raises), when the Bind needs nothing more
    than that: its formats fit its values, it binds every parameter of the statement, and
    it needs no description (:func:`needs_description`); ``None`` otherwise. Found once per
    statement and shape of Bind (its formats, its count of values)."""
    key = (m.param_formats, len(m.params), stmt.described is None)
    found = stmt.decoders.get(key, _UNKNOWN)
    if found is _UNKNOWN:
        found = stmt.decoders[key] = _decoders(stmt, m)
    return found  # type: ignore[return-value]


_UNKNOWN: Final = object()


def _decoders(stmt: Prepared, m: codec.Bind) -> tuple[Decode, ...] | None:
    n = len(m.params)
    try:
        if needs_description(stmt, m) or not binds_every_parameter(stmt, m):
            return None
    except codec.MalformedMessage:
        return None
    oids = list(stmt.param_oids) + [0] * n
    if stmt.described is not None:
        oids = [o or d for o, d in zip(oids, stmt.described.param_oids + (0,) * n, strict=False)]
    out: list[Decode] = []
    for i in range(n):
        if _format(m, i) == 1:
            out.append(pgt.binary_decoder(oids[i]))
        else:
            tdec = pgt.text_decoder(oids[i])
            out.append(bytes.decode if tdec is None else _text_then(tdec))
    return tuple(out)


def _text_then(decode: Callable[[str], object]) -> Decode:
    return lambda raw: decode(raw.decode())


def binds_every_parameter(stmt: Prepared, m: codec.Bind) -> bool:
    """Whether every ``$n`` of the statement is one of the Bind's values (:func:`bind_text`
    of them cannot fail)."""
    if stmt.numbers is None:
        stmt.numbers = frozenset(_numbers(stmt))
    return all(1 <= n <= len(m.params) for n in stmt.numbers)


def _numbers(stmt: Prepared) -> list[int]:
    """The ``n`` of every ``$n`` :func:`bind_text` replaces."""
    if stmt.parsed is None:
        return []
    return [
        int(nxt.text)
        for tok, nxt in itertools.pairwise(stmt.parsed.tokens)
        if tok.token_type is TokenType.PARAMETER
        and nxt.token_type is TokenType.NUMBER
        and nxt.text.isdigit()
        and tok.end + 1 == nxt.start
    ]


def bind_text(stmt: Prepared, literals: Sequence[str], *, what: str) -> str:
    """The statement's text with ``literals[n - 1]`` in place of each ``$n``, found among
    the tokens the SQL layer split the statement into (``08P01`` for a ``$n`` beyond them)."""
    if stmt.parsed is None:
        return stmt.sql
    out: list[str] = []
    last = 0
    tokens = stmt.parsed.tokens
    base = stmt.parsed.source.start  # the tokens' places are in the text they came in
    for tok, nxt in itertools.pairwise(tokens):
        if tok.token_type is not TokenType.PARAMETER or nxt.token_type is not TokenType.NUMBER:
            continue
        if not nxt.text.isdigit() or tok.end + 1 != nxt.start:
            continue
        n = int(nxt.text)
        if not 1 <= n <= len(literals):
            raise PgError("08P01", f"{what} supplies {len(literals)} parameters, but ${n} is used")
        out.append(stmt.sql[last : tok.start - base])
        out.append(literals[n - 1])
        last = nxt.end + 1 - base
    out.append(stmt.sql[last:])
    return "".join(out)


def cast_name(pg: pgt.PgType | None) -> str | None:
    """The type name to cast a bound literal to (``None``: leave it untyped text)."""
    if pg is None or pg.oid in (25, 1043, 19, 705):
        return None
    return {
        "int8": "bigint",
        "int4": "integer",
        "int2": "smallint",
        "float8": "double precision",
        "float4": "real",
        "bool": "boolean",
    }.get(pg.name, pg.name)


_VALUE_LENGTH: Final = struct.Struct("!i")


@dataclass(frozen=True, slots=True)
class BindShape:
    """A lookup's Bind of one value (to the unnamed portal) as bytes: everything before the
    value (``body[:value_at - 4]``: portal, statement, parameter formats, count) and after it
    (its last ``tail`` bytes: the result formats), the same for every execution of a
    prepared lookup by a client; a Bind that has them, and its value's length field in
    place, is the same Bind with another value (:meth:`fits`), decoded with ``decode``."""

    head: bytes
    tail: int
    suffix: bytes
    value_at: int
    name: str
    stmt: Prepared
    undescribed: bool
    result_formats: tuple[int, ...]
    decode: Callable[[bytes], object]

    @staticmethod
    def of(
        body: bytes, m: codec.Bind, stmt: Prepared, decode: Callable[[bytes], object]
    ) -> BindShape:
        raw = m.params[0]
        assert raw is not None
        tail = 2 + 2 * len(m.result_formats)
        value_at = len(body) - tail - len(raw)
        return BindShape(
            body[: value_at - 4],
            tail,
            body[-tail:],
            value_at,
            m.statement,
            stmt,
            stmt.described is None,
            m.result_formats,
            decode,
        )

    def fits(self, body: bytes, statements: dict[str, Prepared]) -> bool:
        """Whether ``body`` is a Bind of this shape whose statement is still this one."""
        if not (body.startswith(self.head) and body.endswith(self.suffix)):
            return False
        (size,) = _VALUE_LENGTH.unpack_from(body, self.value_at - 4)
        return (
            size == len(body) - self.value_at - self.tail
            and statements.get(self.name) is self.stmt
            and (self.stmt.described is None) == self.undescribed
        )
