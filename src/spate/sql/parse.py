"""Text to statements: split at ``;``, recognise the statement, parse queries with sqlglot.

sqlglot parses the queries and the statements PostgreSQL shares with Materialize (CREATE TABLE,
INSERT, UPDATE, DELETE, SELECT, WITH, VALUES). The statements only Materialize has (CREATE
MATERIALIZED VIEW … IN CLUSTER, CREATE CLUSTER … REPLICAS, SUBSCRIBE, SHOW …, ALTER … SET
(RETAIN HISTORY …), CREATE SOURCE/SINK/SECRET/CONNECTION, ``AS OF``) have heads that sqlglot
does not know; :class:`Cursor` reads those heads over sqlglot's own tokens, and whatever query
they carry is handed to sqlglot again. No SQL grammar is written here beyond those heads.

Positions are 0-based offsets into the whole submitted text; errors report them 1-based.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.parsers.postgres import PostgresParser
from sqlglot.tokenizer_core import Token, TokenizerCore, TokenType

from spate.sql import catalog_functions
from spate.sql.depth import MAX_NESTING, too_complex
from spate.sql.errors import FeatureNotSupported, SqlError, SqlSyntaxError
from spate.sql.notices import truncate_identifier, warn_if_truncated
from spate.sql.spark import spark_to_postgres

DIALECTS = {"postgres": "postgres", "materialize": "postgres", "spark": "spark"}


_ONE_UNIT = re.compile(r"\s*-?[0-9]+(?:\.[0-9]+)?\s*[a-zA-Z]+\s*")


UNARY_PLUS = "unary_plus"
"""The mark (in ``Expression.meta``) of parentheses that stand for a unary ``+``."""


class _Parser(PostgresParser):
    # sqlglot drops a unary plus; PostgreSQL types it (numbers only: ``+ text`` fails with
    # 42883), so it is kept as parentheses marked UNARY_PLUS (printed back as parentheses). In
    # front of a number it changes nothing and stays dropped.
    UNARY_PARSERS: ClassVar = {
        **PostgresParser.UNARY_PARSERS,
        TokenType.PLUS: lambda self: self._parse_unary_plus(),
    }

    def _parse_unary_plus(self) -> exp.Expr | None:
        inner = self._parse_unary()
        if inner is None or (isinstance(inner, exp.Literal) and not inner.is_string):
            return inner
        out = exp.Paren(this=inner)
        out.meta[UNARY_PLUS] = True
        return out

    # date_part(text, x) stays a function of its own (sqlglot makes it an EXTRACT, whose
    # result is numeric where date_part's is double precision)
    FUNCTION_PARSERS: ClassVar = {
        k: v for k, v in PostgresParser.FUNCTION_PARSERS.items() if k != "DATE_PART"
    }

    def _parse_interval_span(
        self, this: exp.Expr, parse_function_unit: bool = True
    ) -> exp.Interval:
        # sqlglot keeps the first "<n> <unit>" of a text with more in it and drops the rest
        # (interval '1 day 02:00:00' would be '1 day'): the whole text is the interval
        out = super()._parse_interval_span(this, parse_function_unit)
        if (
            this is not None
            and this.is_string
            and isinstance(out.args.get("unit"), exp.Var)
            and len(_ONE_UNIT.findall(this.name)) == 1
            and _ONE_UNIT.fullmatch(this.name) is None
        ):
            out.set("this", this)
            out.set("unit", None)
        return out


class _TokenizerCore(TokenizerCore):
    __slots__ = ()

    def _scan_string(self, start: str) -> bool:
        # ``$`` and a digit is a parameter (``$1``), as PostgreSQL's lexer reads it: no dollar
        # quote tag starts with a digit. sqlglot takes ``$1,$`` of ``($1,$2)`` for the opening
        # of a dollar-quoted string.
        if start == "$" and self._peek.isdigit():
            self._add(TokenType.PARAMETER)
            return True
        return bool(super()._scan_string(start))


class _Tokenizer(Postgres.Tokenizer):
    def _init_core(self) -> TokenizerCore:
        core = super()._init_core()
        core.__class__ = _TokenizerCore  # the same slots; only the ``$n`` rule differs
        return core


class SpatePostgres(Postgres):
    """PostgreSQL as sqlglot reads it, but for ``date_part``, interval constants (see
    :class:`_Parser`) and parameters ``$n`` next to a ``$`` (:class:`_TokenizerCore`)."""

    Parser = _Parser
    Tokenizer = _Tokenizer


def _reader(dialect: str) -> str | type[Postgres]:
    name = sqlglot_dialect(dialect)
    return SpatePostgres if name == "postgres" else name


def sqlglot_dialect(dialect: str) -> str:
    try:
        return DIALECTS[dialect]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise SqlError(f"unknown SQL dialect {dialect!r}; dialects: {known}") from None


@dataclass(frozen=True, slots=True)
class Source:
    """One statement's place in the submitted text."""

    text: str
    """The whole submitted text."""
    start: int
    end: int
    dialect: str

    @property
    def sql(self) -> str:
        return self.text[self.start : self.end]


def split(text: str, dialect: str = "postgres") -> list[tuple[Source, list[Token]]]:
    """The ``;``-separated statements of ``text`` with their tokens (empty ones dropped).

    Parentheses nested deeper than :data:`~spate.sql.depth.MAX_NESTING` are refused here
    (``54001``), before sqlglot's recursive parser sees them."""
    tokens = tokenize(text, 0, dialect)
    for token in tokens:  # PostgreSQL's lexer: a notice per identifier it truncates, up front
        if token.token_type is TokenType.IDENTIFIER:
            warn_if_truncated(token.text)
        elif token.token_type is TokenType.VAR:
            warn_if_truncated(token.text.lower())
    out: list[tuple[Source, list[Token]]] = []
    current: list[Token] = []
    depth = 0
    for tok in [*tokens, None]:
        if tok is not None and tok.token_type is TokenType.L_PAREN:
            depth += 1
            if depth > MAX_NESTING:
                raise too_complex(
                    f"parentheses nested deeper than {MAX_NESTING}", tok.start + 1, text
                )
        elif tok is not None and tok.token_type is TokenType.R_PAREN:
            depth = max(0, depth - 1)
        if tok is None or tok.token_type is TokenType.SEMICOLON:
            depth = 0
            if current:
                src = Source(text, current[0].start, current[-1].end + 1, dialect)
                out.append((src, current))
            current = []
        else:
            current.append(tok)
    return out


_COMMANDS = (TokenType.SHOW, TokenType.COMMAND, TokenType.FETCH, TokenType.EXECUTE)
"""Heads after which sqlglot keeps the rest of the statement as one string."""


def tokenize(text: str, base: int, dialect: str) -> list[Token]:
    """sqlglot's tokens of ``text``; the rest of a "command" (SHOW, EXPLAIN, RESET…), which
    sqlglot keeps as one string, tokenized as well."""
    try:
        tokens = list(Dialect.get_or_raise(_reader(dialect)).tokenize(text))
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}", position=base + 1, text=text) from None
    out: list[Token] = []
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else None
        start = -1
        if prev is not None and prev.token_type in _COMMANDS:
            start = prev.end + 1
            while start < len(text) and text[start].isspace():
                start += 1
        if (
            tok.token_type is TokenType.STRING
            and start >= 0
            and text[start : start + len(tok.text)] == tok.text
        ):
            inner = tokenize(text[start : start + len(tok.text)], base, dialect)
            for t in inner:
                t.start += start
                t.end += start
            out.extend(inner)
        else:
            out.append(tok)
    return out


def offset_of(text: str, line: int, col: int) -> int:
    """0-based offset of 1-based ``line``/``col`` in ``text``."""
    at = 0
    for _ in range(line - 1):
        nl = text.find("\n", at)
        if nl < 0:
            break
        at = nl + 1
    return at + max(0, col - 1)


def parse_sql(src: Source, start: int, end: int | None = None) -> exp.Expression:
    """Parse ``src.text[start:end]`` with sqlglot; one statement or a syntax error."""
    stop = src.end if end is None else end
    fragment = src.text[start:stop]
    try:
        parsed = sqlglot.parse(fragment, read=_reader(src.dialect), error_level=ErrorLevel.RAISE)
    except ParseError as e:
        pos = start
        detail = str(e).split("\n")[0]
        if e.errors:
            first = e.errors[0]
            detail = str(first.get("description") or detail).split(". Line")[0]
            if first.get("line") is not None:
                pos = start + offset_of(fragment, int(first["line"]), int(first["col"]))
                pos = max(start, pos - len(str(first.get("highlight") or "")) + 1)
        raise SqlSyntaxError(f"syntax error: {detail}", position=pos + 1, text=src.text) from None
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}", position=start + 1, text=src.text) from None
    stmts = [p for p in parsed if p is not None]
    if len(stmts) != 1:
        raise SqlSyntaxError("expected one statement", position=start + 1, text=src.text)
    stmt = stmts[0]
    if isinstance(stmt, exp.Command):
        word = str(stmt.this).upper()
        raise FeatureNotSupported(
            f"{word} is not supported here", position=start + 1, text=src.text
        )
    normalized = normalize_identifiers(stmt, dialect=sqlglot_dialect(src.dialect))
    assert isinstance(normalized, exp.Expression)
    for node in normalized.walk():
        if isinstance(node, exp.Identifier) and isinstance(node.this, str):
            node.set("this", truncate_identifier(node.this))  # the notice came from split
    if src.dialect == "spark":
        normalized = spark_to_postgres(normalized)
    else:  # format_type(…), 'x'::regclass…: SQL over pg_catalog (spate.sql.catalog_functions)
        normalized = catalog_functions.rewrite(normalized)
    _shift(normalized, start)
    return normalized


def _shift(tree: exp.Expression, base: int) -> None:
    """Make the positions sqlglot recorded offsets into the whole text."""
    if base == 0:
        return
    for node in tree.walk():
        meta = node._meta
        if meta and "start" in meta:
            meta["start"] += base
            meta["end"] += base


def span(node: exp.Expression) -> tuple[int, int] | None:
    """0-based ``(start, end)`` covered by ``node``'s positioned descendants."""
    lo: int | None = None
    hi: int | None = None
    for n in node.walk():
        meta = n._meta
        if meta and "start" in meta:
            lo = meta["start"] if lo is None else min(lo, meta["start"])
            hi = meta["end"] if hi is None else max(hi, meta["end"])
    return None if lo is None or hi is None else (lo, hi)


def position(node: exp.Expression | None) -> int | None:
    """1-based position of ``node`` (``None`` if sqlglot kept none)."""
    if node is None:
        return None
    s = span(node)
    return None if s is None else s[0] + 1


# --- reading statement heads over tokens ------------------------------------------------------


class Cursor:
    """Reads a statement's tokens: keywords, names, literals, parenthesised lists."""

    def __init__(self, src: Source, tokens: list[Token]) -> None:
        self.src = src
        self.tokens = tokens
        self.i = 0

    # -- looking ------------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def word(self, ahead: int = 0) -> str:
        """The upper-case text of an unquoted token (``""`` past the end or if quoted)."""
        tok = self.peek(ahead)
        if tok is None or tok.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
            return ""
        return tok.text.upper()

    def at_words(self, *words: str) -> bool:
        return all(self.word(k) == w for k, w in enumerate(words))

    def at_end(self) -> bool:
        return self.i >= len(self.tokens)

    def here(self) -> int:
        """0-based offset of the current token (the statement's end past the last)."""
        tok = self.peek()
        return self.src.end if tok is None else tok.start

    # -- consuming ----------------------------------------------------------------------------

    def accept(self, *words: str) -> bool:
        if self.at_words(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}")

    def accept_token(self, kind: TokenType) -> bool:
        tok = self.peek()
        if tok is not None and tok.token_type is kind:
            self.i += 1
            return True
        return False

    def expect_token(self, kind: TokenType, shown: str) -> None:
        if not self.accept_token(kind):
            raise self.error(f"expected {shown}")

    def name(self, what: str = "a name") -> str:
        """An identifier: unquoted ones fold to lower case, quoted ones are kept."""
        tok = self.peek()
        if tok is None or tok.token_type in (
            TokenType.STRING,
            TokenType.NUMBER,
            TokenType.L_PAREN,
            TokenType.R_PAREN,
            TokenType.COMMA,
            TokenType.EQ,
        ):
            raise self.error(f"expected {what}")
        self.i += 1
        if tok.token_type is TokenType.IDENTIFIER:
            return truncate_identifier(tok.text)
        return truncate_identifier(tok.text.lower())

    def dotted_name(self, what: str = "a name") -> str:
        """``a`` or ``schema.a``/``db.schema.a`` (only the last part is kept)."""
        parts = [self.name(what)]
        while self.accept_token(TokenType.DOT):
            parts.append(self.name(what))
        return parts[-1]

    def string(self, what: str = "a quoted string") -> str:
        tok = self.peek()
        if tok is None or tok.token_type is not TokenType.STRING:
            raise self.error(f"expected {what}")
        self.i += 1
        return tok.text

    def integer(self, what: str = "an integer") -> int:
        negative = self.accept_token(TokenType.DASH)
        tok = self.peek()
        if tok is None or tok.token_type is not TokenType.NUMBER or not tok.text.isdigit():
            raise self.error(f"expected {what}")
        self.i += 1
        return -int(tok.text) if negative else int(tok.text)

    def value(self) -> str | int | bool:
        """An option value: a string, integer, TRUE/FALSE or a bare word."""
        tok = self.peek()
        if tok is None:
            raise self.error("expected a value")
        if tok.token_type is TokenType.STRING:
            self.i += 1
            return tok.text
        if tok.token_type in (TokenType.NUMBER, TokenType.DASH):
            return self.integer()
        if tok.token_type is TokenType.TRUE:
            self.i += 1
            return True
        if tok.token_type is TokenType.FALSE:
            self.i += 1
            return False
        return self.name("a value")

    def options(self) -> dict[str, tuple[str | int | bool, int]]:
        """``(NAME [=] value, …)``: upper-case multi-word names to (value, position)."""
        self.expect_token(TokenType.L_PAREN, "(")
        out: dict[str, tuple[str | int | bool, int]] = {}
        while True:
            at = self.here()
            words: list[str] = []
            while (
                (tok := self.peek()) is not None
                and self.word()
                and tok.token_type
                not in (
                    TokenType.STRING,
                    TokenType.NUMBER,
                    TokenType.EQ,
                    TokenType.COMMA,
                    TokenType.R_PAREN,
                    TokenType.L_PAREN,
                )
            ):
                if words and self.word() in ("TRUE", "FALSE"):
                    break
                words.append(self.word())
                self.i += 1
                if self.word() == "SECRET" and words[-1] == "PASSWORD":
                    break
            if not words:
                raise self.error("expected an option name")
            self.accept_token(TokenType.EQ)
            if self.word() == "SECRET":
                self.i += 1
                words.append("SECRET")
            out[" ".join(words)] = (self.value(), at)
            if self.accept_token(TokenType.COMMA):
                continue
            self.expect_token(TokenType.R_PAREN, ") or ,")
            return out

    def name_list(self, what: str = "a name") -> list[str]:
        self.expect_token(TokenType.L_PAREN, "(")
        out = [self.name(what)]
        while self.accept_token(TokenType.COMMA):
            out.append(self.name(what))
        self.expect_token(TokenType.R_PAREN, ")")
        return out

    def skip_parens(self) -> None:
        """Skip one balanced ``( … )``."""
        depth = 0
        while not self.at_end():
            kind = self.tokens[self.i].token_type
            self.i += 1
            if kind is TokenType.L_PAREN:
                depth += 1
            elif kind is TokenType.R_PAREN:
                depth -= 1
                if depth <= 0:
                    return

    def word_in(self, allowed: Collection[str], complaint: Callable[[str], str]) -> str:
        """The next word, consumed, when it is one of ``allowed``; else
        :class:`FeatureNotSupported` at it, saying ``complaint(word)`` (``?`` past the end)."""
        at, word = self.here(), self.word()
        if word not in allowed:
            raise FeatureNotSupported(complaint(word or "?"), position=at + 1, text=self.src.text)
        self.i += 1
        return word

    def end(self) -> None:
        if not self.at_end():
            raise self.error("unexpected text at the end of the statement")

    def error(self, message: str) -> SqlSyntaxError:
        tok = self.peek()
        got = "the end of the statement" if tok is None else repr(tok.text)
        return SqlSyntaxError(
            f"syntax error: {message}, got {got}", position=self.here() + 1, text=self.src.text
        )


def find_top_level(tokens: list[Token], start: int, *words: str) -> int | None:
    """Index of the last occurrence of ``words`` at parenthesis depth 0 from ``start``."""
    depth = 0
    found: int | None = None
    n = len(words)
    for i in range(start, len(tokens)):
        kind = tokens[i].token_type
        if kind is TokenType.L_PAREN:
            depth += 1
        elif kind is TokenType.R_PAREN:
            depth -= 1
        elif (
            depth == 0
            and i + n <= len(tokens)
            and all(
                tokens[i + k].token_type not in (TokenType.STRING, TokenType.IDENTIFIER)
                and tokens[i + k].text.upper() == w
                for k, w in enumerate(words)
            )
        ):
            found = i
    return found
