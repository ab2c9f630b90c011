"""Session statements, recognised from a statement's tokens into typed statements.

A wire session answers some statements itself — transaction control, ``SET``/``RESET``/
``SHOW`` of its variables, cursors (``DECLARE``/``FETCH``/``MOVE``/``CLOSE``), ``COPY``,
SQL prepared statements (``PREPARE``/``EXECUTE``/``DEALLOCATE``), ``DISCARD``, ``LISTEN``/
``UNLISTEN``. :func:`recognise` reads them from the tokens the statement was split with
(:func:`spate.sql.parse`), over :class:`~spate.sql.parse.Cursor`, and returns one of the types
below; any other statement (``None``) is planned (:func:`spate.sql.plan_statement`). A query a
session statement carries (``DECLARE … FOR query``, ``PREPARE … AS statement``, ``COPY
(query) TO``: :mod:`spate.sql.copy_statement`) is kept as the tokens it was split into (a
:class:`~spate.sql.Parsed` in the text it came in), and ``EXECUTE``'s arguments as their
places in that text: none of them is split again.

A malformed session statement is a syntax error (``42601``) naming what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sqlglot.tokenizer_core import TokenType

from spate.sql import Parsed
from spate.sql.copy_statement import CopyFrom, CopyTo, copy_statement
from spate.sql.parse import Cursor, Source

ENGINE_SHOW: Final = frozenset(
    [
        "tables",
        "views",
        "materialized",
        "sources",
        "sinks",
        "indexes",
        "clusters",
        "columns",
        "create",
        "objects",
        "secrets",
        "connections",
        "schemas",
        "databases",
        "subsources",
    ]
)
"""``SHOW`` of spate's objects, which the planner answers (:mod:`spate.sql.show`)."""


@dataclass(frozen=True, slots=True)
class Begin:
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Commit:
    pass


@dataclass(frozen=True, slots=True)
class Rollback:
    """``ROLLBACK`` (``savepoint`` ``None``) or ``ROLLBACK TO [SAVEPOINT] name``."""

    savepoint: str | None = None

    @property
    def to_savepoint(self) -> bool:
        return self.savepoint is not None


@dataclass(frozen=True, slots=True)
class Savepoint:
    name: str


@dataclass(frozen=True, slots=True)
class Release:
    name: str


@dataclass(frozen=True, slots=True)
class Set:
    """``SET name = value``; ``value`` ``None``: ``RESET name``; ``name`` ``None``: a ``SET``
    that changes nothing here (``SET TRANSACTION …``, ``RESET ALL`` when ``value`` is None)."""

    name: str | None
    value: str | None


@dataclass(frozen=True, slots=True)
class Show:
    name: str  # lower-case; "all" for SHOW ALL


@dataclass(frozen=True, slots=True)
class Declare:
    """``DECLARE name CURSOR FOR query``: ``query`` as the statement was split."""

    name: str
    query: Parsed


@dataclass(frozen=True, slots=True)
class Fetch:
    """``FETCH`` (``move`` false) or ``MOVE`` (``move``: the rows are skipped, not sent)
    of ``count`` rows (``None``: ALL); ``timeout``: Materialize's ``WITH (timeout = …)``."""

    name: str
    count: int | None
    timeout: str | None = None
    move: bool = False


@dataclass(frozen=True, slots=True)
class Close:
    name: str | None  # None: CLOSE ALL


@dataclass(frozen=True, slots=True)
class Prepare:
    """``PREPARE name [(types)] AS statement``: ``statement`` as the ``PREPARE`` was split."""

    name: str
    param_types: tuple[str, ...]
    statement: Parsed


@dataclass(frozen=True, slots=True)
class Execute:
    """``EXECUTE name [(args)]``: each argument's place in the ``EXECUTE``'s text (an
    expression: a literal, a cast…), which the prepared statement is planned with
    (:class:`spate.sql.parameters.Argument`)."""

    name: str
    args: tuple[Source, ...]

    @property
    def arg_texts(self) -> tuple[str, ...]:
        """Each argument as written."""
        return tuple(a.sql for a in self.args)


@dataclass(frozen=True, slots=True)
class Deallocate:
    name: str | None  # None: DEALLOCATE ALL


@dataclass(frozen=True, slots=True)
class Discard:
    what: str  # ALL, PLANS, SEQUENCES, TEMP


@dataclass(frozen=True, slots=True)
class Listen:
    channel: str | None  # None: UNLISTEN *
    unlisten: bool = False


SessionStatement = (
    Begin
    | Commit
    | Rollback
    | Savepoint
    | Release
    | Set
    | Show
    | Declare
    | Fetch
    | Close
    | CopyTo
    | CopyFrom
    | Prepare
    | Execute
    | Deallocate
    | Discard
    | Listen
)


TransactionControl = Begin | Commit | Rollback | Savepoint | Release
"""The statements that open, end or mark a transaction block."""

_CONTROL_HEADS: Final = frozenset(
    {"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"}
)


def transaction_control(parsed: Parsed) -> TransactionControl | None:
    """The transaction-control statement ``parsed`` is (``START TRANSACTION``, ``END``,
    ``ABORT`` are synonyms), or ``None`` for any other statement."""
    if not parsed.tokens or parsed.tokens[0].text.upper() not in _CONTROL_HEADS:
        return None
    found = recognise(parsed)
    assert isinstance(found, (Begin, Commit, Rollback, Savepoint, Release))
    return found


def recognise(parsed: Parsed) -> SessionStatement | None:
    """The session statement ``parsed`` is, or ``None`` for a statement to plan."""
    c = Cursor(parsed.source, list(parsed.tokens))
    head = c.word()
    if head in ("BEGIN", "START"):
        return _begin(c)
    if head in ("COMMIT", "END"):
        c.i += 1
        c.accept("WORK") or c.accept("TRANSACTION")
        c.end()
        return Commit()
    if head in ("ROLLBACK", "ABORT"):
        c.i += 1
        c.accept("WORK") or c.accept("TRANSACTION")
        savepoint = None
        if c.accept("TO"):
            c.accept("SAVEPOINT")
            savepoint = c.name("a savepoint name")
        c.end()
        return Rollback(savepoint)
    if head == "SAVEPOINT":
        c.i += 1
        return Savepoint(_last_name(c, "a savepoint name"))
    if head == "RELEASE":
        c.i += 1
        c.accept("SAVEPOINT")
        return Release(_last_name(c, "a savepoint name"))
    if head == "SET":
        return _set(c)
    if head == "RESET":
        c.i += 1
        if c.accept("ALL"):
            c.end()
            return Set(None, None)
        return Set(_dotted(c), None)
    if head == "SHOW":
        return _show(c)
    if head == "DECLARE":
        return _declare(c)
    if head in ("FETCH", "MOVE"):
        return _fetch(c, move=head == "MOVE")
    if head == "CLOSE":
        c.i += 1
        if c.accept("ALL"):
            c.end()
            return Close(None)
        return Close(_last_name(c, "a cursor name"))
    if head == "COPY":
        return copy_statement(c)
    if head == "PREPARE":
        return _prepare(c)
    if head == "EXECUTE":
        return _execute(c)
    if head == "DEALLOCATE":
        c.i += 1
        c.accept("PREPARE")
        if c.accept("ALL"):
            c.end()
            return Deallocate(None)
        return Deallocate(_last_name(c, "a prepared statement name"))
    if head == "DISCARD":
        c.i += 1
        what = c.word()
        if what not in ("ALL", "PLANS", "SEQUENCES", "TEMP", "TEMPORARY"):
            raise c.error("expected ALL, PLANS, SEQUENCES or TEMP")
        c.i += 1
        c.end()
        return Discard("TEMP" if what == "TEMPORARY" else what)
    if head in ("LISTEN", "UNLISTEN"):
        c.i += 1
        if head == "UNLISTEN" and c.accept_token(TokenType.STAR):
            c.end()
            return Listen(None, unlisten=True)
        return Listen(_last_name(c, "a channel name"), unlisten=head == "UNLISTEN")
    return None


# -- the statements --------------------------------------------------------------------------


def _last_name(c: Cursor, what: str) -> str:
    name = c.name(what)
    c.end()
    return name


def _dotted(c: Cursor) -> str:
    """A variable name: ``name`` or ``a.b`` (kept whole, lower-cased unless quoted)."""
    parts = [c.name("a variable name")]
    while c.accept_token(TokenType.DOT):
        parts.append(c.name("a variable name"))
    c.end()
    return ".".join(parts)


def _rest_parsed(c: Cursor) -> Parsed:
    """The statement from the current token to its end, as it was split (its tokens, in the
    text they came in)."""
    tokens = c.tokens[c.i :]
    src = Source(c.src.text, tokens[0].start, tokens[-1].end + 1, c.src.dialect)
    return Parsed(src, tuple(tokens))


def _rest(c: Cursor) -> str:
    """The text from the current token to the statement's end."""
    return c.src.text[c.here() : c.src.end].strip()


def _begin(c: Cursor) -> Begin:
    if c.accept("START"):
        c.expect("TRANSACTION")
    else:
        c.expect("BEGIN")
        c.accept("WORK") or c.accept("TRANSACTION")
    read_only = False
    while not c.at_end():  # transaction modes: ISOLATION LEVEL …, READ ONLY|WRITE, …
        if c.accept("READ", "ONLY"):
            read_only = True
        else:
            c.i += 1
    return Begin(read_only)


def _set(c: Cursor) -> Set:
    c.expect("SET")
    if c.accept("SESSION", "CHARACTERISTICS") or c.accept("TRANSACTION"):
        return Set(None, None)
    c.accept("SESSION") or c.accept("LOCAL")
    if c.accept("TIME", "ZONE"):
        return Set("timezone", _value(c))
    if c.accept("NAMES"):
        return Set("client_encoding", _value(c))
    parts = [c.name("a variable name")]
    while c.accept_token(TokenType.DOT):
        parts.append(c.name("a variable name"))
    if not c.accept_token(TokenType.EQ):
        c.expect("TO")
    return Set(".".join(parts), _value(c))


def _value(c: Cursor) -> str:
    """A SET value as written: the text of one quoted string, else the rest as it stands."""
    tok = c.peek()
    if tok is None:
        raise c.error("expected a value")
    if tok.token_type is TokenType.STRING and c.peek(1) is None:
        c.i += 1
        return tok.text
    return _rest(c)


def _show(c: Cursor) -> Show | None:
    c.expect("SHOW")
    if c.at_end():
        raise c.error("expected a variable name")
    first = c.word().lower()
    if first in ENGINE_SHOW:
        return None
    if first == "cluster" and c.peek(1) is not None:
        return None
    words: list[str] = []
    while not c.at_end():
        tok = c.peek()
        assert tok is not None
        if tok.token_type is TokenType.IDENTIFIER:
            words.append(tok.text)
        elif tok.token_type is TokenType.DOT:
            words.append(".")
        else:
            words.append(tok.text.lower())
        c.i += 1
    name = " ".join(words).replace(" . ", ".")
    if name == "transaction isolation level":
        return Show("transaction_isolation")
    if name == "time zone":
        return Show("timezone")
    return Show(name)


def _declare(c: Cursor) -> Declare:
    c.expect("DECLARE")
    name = c.name("a cursor name")
    for word in ("BINARY", "INSENSITIVE", "ASENSITIVE"):
        c.accept(word)
    c.accept("NO", "SCROLL") or c.accept("SCROLL")
    c.expect("CURSOR")
    if c.accept("WITH", "HOLD") or c.accept("WITHOUT", "HOLD"):
        pass
    c.expect("FOR")
    if c.at_end():
        raise c.error("expected a query")
    return Declare(name, _rest_parsed(c))


def _fetch(c: Cursor, *, move: bool) -> Fetch:
    c.i += 1
    count: int | None = 1
    if c.accept("ALL") or c.accept("FORWARD", "ALL"):
        count = None
    elif c.accept("NEXT"):
        count = 1
    elif c.accept("FORWARD"):
        count = _count(c, default=1)
    else:
        count = _count(c, default=1)
    if not c.accept("FROM"):
        c.accept("IN")
    name = c.name("a cursor name")
    timeout: str | None = None
    if c.accept("WITH"):
        options = c.options()
        for key, (value, _) in options.items():
            if key != "TIMEOUT":
                raise c.error(f"unknown FETCH option {key}")
            timeout = str(value)
    c.end()
    return Fetch(name, count, timeout, move)


def _count(c: Cursor, *, default: int) -> int:
    tok = c.peek()
    if tok is not None and tok.token_type is TokenType.NUMBER:
        return c.integer("a row count")
    return default


def _prepare(c: Cursor) -> Prepare:
    c.expect("PREPARE")
    name = c.name("a prepared statement name")
    types: list[str] = []
    if c.accept_token(TokenType.L_PAREN):
        for item in _items(c):
            typename = " ".join(item.lower().split())
            if not typename:
                raise c.error("expected a type name")
            types.append(typename)
    c.expect("AS")
    if c.at_end():
        raise c.error("expected a statement")
    return Prepare(name, tuple(types), _rest_parsed(c))


def _execute(c: Cursor) -> Execute:
    c.expect("EXECUTE")
    name = c.name("a prepared statement name")
    args: list[Source] = []
    if c.accept_token(TokenType.L_PAREN):
        args = [_stripped(c.src, start, end) for start, end in _item_spans(c)]
        if any(a.start == a.end for a in args):
            raise c.error("expected an expression")
    c.end()
    return Execute(name, tuple(args))


def _stripped(src: Source, start: int, end: int) -> Source:
    text = src.text
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Source(text, start, end, src.dialect)


def _items(c: Cursor) -> list[str]:
    """After a ``(``: the text of each comma-separated item up to the matching ``)`` (which is
    consumed), commas inside nested parentheses kept."""
    return [c.src.text[start:end] for start, end in _item_spans(c)]


def _item_spans(c: Cursor) -> list[tuple[int, int]]:
    """After a ``(``: where each comma-separated item is in the text, up to the matching
    ``)`` (which is consumed), commas inside nested parentheses kept."""
    items: list[tuple[int, int]] = []
    start, depth = c.here(), 0
    while True:
        tok = c.peek()
        if tok is None:
            raise c.error("expected )")
        if tok.token_type is TokenType.L_PAREN:
            depth += 1
        elif tok.token_type is TokenType.R_PAREN and depth > 0:
            depth -= 1
        elif tok.token_type in (TokenType.COMMA, TokenType.R_PAREN) and depth == 0:
            items.append((start, tok.start))
            c.i += 1
            if tok.token_type is TokenType.R_PAREN:
                return items
            start = c.here()
            continue
        c.i += 1
