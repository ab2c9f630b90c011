"""``COPY``, read from a statement's tokens into a typed statement: its table or query, its
columns, its direction (``FROM STDIN`` / ``TO STDOUT``) and its format's options.

Both of PostgreSQL's option syntaxes are read: ``[WITH] (FORMAT csv, HEADER [bool],
DELIMITER 'c', NULL 's', QUOTE 'c', ESCAPE 'c', FORCE_QUOTE (cols) | *, FORCE_NOT_NULL (cols),
FORCE_NULL (cols), ENCODING 'e', FREEZE [bool])`` and the old one (``[WITH] [BINARY]
[DELIMITER [AS] 'c'] [NULL [AS] 's'] [CSV [HEADER] [QUOTE [AS] 'c'] [ESCAPE [AS] 'c']
[FORCE QUOTE cols | * ] [FORCE NOT NULL cols]]``). The options are checked as PostgreSQL
checks them, with its SQLSTATEs: an unknown option or one given twice ``42601``, a format it
does not know or a delimiter of more than one character ``22023``, an option of another
format or direction ``0A000``.

A ``COPY (query) TO STDOUT`` carries its query as the tokens it was split into (not a text
to split again). ``COPY table [(cols)] TO STDOUT`` is the query ``SELECT cols FROM table``,
which this module writes with quoted names and tokenizes once, itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from sqlglot.tokenizer_core import TokenType

from spate.sql import Parsed
from spate.sql.errors import FeatureNotSupported, InvalidParameterValue
from spate.sql.parse import Cursor, Source, split

FORMATS: Final = ("text", "csv", "binary")


@dataclass(frozen=True, slots=True)
class CopyOptions:
    """A COPY's format and its options, PostgreSQL's defaults filled in (a CSV's delimiter
    ``,``, NULL string empty, escape its quote)."""

    format: str = "text"  # text | csv | binary
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"
    quote: str = '"'
    escape: str = '"'
    force_quote: tuple[str, ...] = ()
    """COPY TO, CSV: the columns whose non-NULL values are always quoted."""
    force_quote_all: bool = False
    """``FORCE_QUOTE *``."""
    force_not_null: tuple[str, ...] = ()
    """COPY FROM, CSV: the columns where a field equal to the NULL string is that string."""
    force_null: tuple[str, ...] = ()
    """COPY FROM, CSV: the columns where a quoted field equal to the NULL string is NULL."""


@dataclass(frozen=True, slots=True)
class CopyFrom:
    """``COPY table [(cols)] FROM STDIN …``: ``table`` its name (without its schema),
    ``columns`` the columns given (``None``: all of them, in order)."""

    table: str
    columns: tuple[str, ...] | None
    options: CopyOptions = field(default_factory=CopyOptions)


@dataclass(frozen=True, slots=True)
class CopyTo:
    """``COPY (query) TO STDOUT …`` or ``COPY table [(cols)] TO STDOUT …``: ``query`` the
    statement whose rows are sent (a SELECT, or SUBSCRIBE), split and tokenized."""

    query: Parsed
    options: CopyOptions = field(default_factory=CopyOptions)


def copy_statement(c: Cursor) -> CopyFrom | CopyTo:
    """The COPY at ``c`` (its first token, ``COPY``), read to the statement's end."""
    c.expect("COPY")
    query: Parsed | None = None
    table: list[str] = []
    columns: tuple[str, ...] | None = None
    tok = c.peek()
    if tok is not None and tok.token_type is TokenType.L_PAREN:
        first = c.i + 1
        c.skip_parens()
        inner = c.tokens[first : c.i - 1]
        if not inner or c.tokens[c.i - 1].token_type is not TokenType.R_PAREN:
            raise c.error("expected a query in parentheses")
        src = Source(c.src.text, inner[0].start, inner[-1].end + 1, c.src.dialect)
        query = Parsed(src, tuple(inner))
    else:
        table = [c.name("a table name")]
        while c.accept_token(TokenType.DOT):
            table.append(c.name("a table name"))
        tok = c.peek()
        if tok is not None and tok.token_type is TokenType.L_PAREN:
            columns = tuple(c.name_list("a column name"))
    if c.accept("FROM"):
        if query is not None:
            raise c.error("expected TO (a query is copied TO STDOUT)")
        if not c.accept("STDIN"):
            at = c.here()
            raise FeatureNotSupported(
                "COPY FROM a file or program is not supported: use COPY FROM STDIN (\\copy)",
                position=at + 1,
                text=c.src.text,
            )
        return CopyFrom(table[-1], columns, _options(c, to=False))
    c.expect("TO")
    if not c.accept("STDOUT"):
        at = c.here()
        raise FeatureNotSupported(
            "only COPY … TO STDOUT is supported", position=at + 1, text=c.src.text
        )
    options = _options(c, to=True)
    if query is None:
        query = _table_query(table, columns, c.src.dialect)
    return CopyTo(query, options)


def _table_query(table: list[str], columns: tuple[str, ...] | None, dialect: str) -> Parsed:
    """``SELECT cols FROM table``, names quoted, split and tokenized here (once)."""
    names = "*" if columns is None else ", ".join(_quoted(n) for n in columns)
    text = f"SELECT {names} FROM {'.'.join(_quoted(p) for p in table)}"  # noqa: S608 (quoted)
    ((src, tokens),) = split(text, dialect)
    return Parsed(src, tuple(tokens))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- the options ------------------------------------------------------------------------------

_VALUE_TOKENS: Final = (TokenType.STRING, TokenType.BYTE_STRING, TokenType.NATIONAL_STRING)
_TRUE: Final = ("true", "on", "1", "yes")
_FALSE: Final = ("false", "off", "0", "no")


def _options(c: Cursor, *, to: bool) -> CopyOptions:
    given: dict[str, object] = {}
    c.accept("WITH")
    tok = c.peek()
    if tok is not None and tok.token_type is TokenType.L_PAREN:
        _new_syntax(c, given)
    else:
        _old_syntax(c, given)
    c.end()
    return _checked(c, given, to=to)


def _put(c: Cursor, given: dict[str, object], name: str, value: object) -> None:
    if name in given:
        raise c.error("conflicting or redundant options")
    given[name] = value


def _new_syntax(c: Cursor, given: dict[str, object]) -> None:
    """``(name [value], …)``."""
    c.expect_token(TokenType.L_PAREN, "(")
    while True:
        word = c.word()
        if not word:
            raise c.error("expected a COPY option")
        c.i += 1
        name = word.lower()
        if name in ("force_quote", "force_not_null", "force_null"):
            if name == "force_quote" and c.accept_token(TokenType.STAR):
                _put(c, given, name, "*")
            else:
                _put(c, given, name, tuple(c.name_list("a column name")))
        else:
            _put(c, given, name, _value(c))
        if c.accept_token(TokenType.COMMA):
            continue
        c.expect_token(TokenType.R_PAREN, ") or ,")
        return


def _value(c: Cursor) -> str | bool | None:
    """An option's value: a string, a number or a word (as text), TRUE/FALSE; ``None`` when
    none is given (``HEADER``)."""
    tok = c.peek()
    if tok is None or tok.token_type in (TokenType.COMMA, TokenType.R_PAREN):
        return None
    c.i += 1
    if tok.token_type is TokenType.TRUE:
        return True
    if tok.token_type is TokenType.FALSE:
        return False
    return tok.text if tok.token_type in _VALUE_TOKENS else tok.text.lower()


def _old_syntax(c: Cursor, given: dict[str, object]) -> None:
    """``BINARY``, ``DELIMITER [AS] 'c'``, ``NULL [AS] 's'``, ``CSV``, ``HEADER``,
    ``QUOTE [AS] 'c'``, ``ESCAPE [AS] 'c'``, ``FORCE QUOTE cols|*``, ``FORCE NOT NULL cols``,
    in any order (as PostgreSQL's grammar takes them)."""
    while not c.at_end():
        word = c.word()
        if word in ("BINARY", "CSV"):
            c.i += 1
            _put(c, given, "format", word.lower())
        elif word == "HEADER":
            c.i += 1
            _put(c, given, "header", True)
        elif word == "FREEZE":
            c.i += 1
            _put(c, given, "freeze", True)
        elif word in ("DELIMITER", "NULL", "QUOTE", "ESCAPE", "ENCODING"):
            c.i += 1
            c.accept("AS")
            tok = c.peek()
            if tok is None or tok.token_type not in _VALUE_TOKENS:
                raise c.error(f"expected a quoted string after {word}")
            c.i += 1
            _put(c, given, word.lower(), tok.text)
        elif word == "FORCE":
            c.i += 1
            if c.accept("QUOTE"):
                name = "force_quote"
            elif c.accept("NOT", "NULL"):
                name = "force_not_null"
            else:
                raise c.error("expected QUOTE or NOT NULL after FORCE")
            if name == "force_quote" and c.accept_token(TokenType.STAR):
                _put(c, given, name, "*")
                continue
            names = [c.name("a column name")]
            while c.accept_token(TokenType.COMMA):
                names.append(c.name("a column name"))
            _put(c, given, name, tuple(names))
        else:
            raise c.error("expected a COPY option")


def _one_char(name: str, value: object) -> str:
    if not isinstance(value, str) or len(value) != 1:
        raise InvalidParameterValue(f"COPY {name} must be a single one-byte character")
    return value


def _boolean(c: Cursor, name: str, value: object) -> bool:
    if value is None or value is True or value is False:
        return value is not False
    text = str(value).lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise c.error(f"{name} requires a Boolean value")


def _checked(c: Cursor, given: dict[str, object], *, to: bool) -> CopyOptions:
    """PostgreSQL's checks of a COPY's options (``ProcessCopyOptions``), defaults filled in."""
    out = CopyOptions()
    for name, value in given.items():
        if name == "format":
            fmt = str(value).lower()
            if fmt not in FORMATS:
                raise InvalidParameterValue(f'COPY format "{fmt}" not recognized')
            out = replace(out, format=fmt)
        elif name == "header":
            if isinstance(value, str) and value.lower() == "match":
                raise FeatureNotSupported("COPY HEADER MATCH is not supported")
            out = replace(out, header=_boolean(c, "header", value))
        elif name == "delimiter":
            out = replace(out, delimiter=_one_char(name, value))
        elif name == "quote":
            out = replace(out, quote=_one_char(name, value))
        elif name == "escape":
            out = replace(out, escape=_one_char(name, value))
        elif name == "null":
            if not isinstance(value, str):
                raise c.error("COPY NULL needs a quoted string")
            out = replace(out, null=value)
        elif name == "encoding":
            if str(value).upper().replace("-", "") not in ("UTF8", "UNICODE", "SQL_ASCII"):
                raise FeatureNotSupported(f"COPY encoding {value} is not supported (UTF8)")
        elif name == "freeze":
            _boolean(c, "freeze", value)
        elif name == "force_quote":
            if value == "*":
                out = replace(out, force_quote_all=True)
            else:
                assert isinstance(value, tuple)
                out = replace(out, force_quote=value)
        elif name == "force_not_null":
            assert isinstance(value, tuple)
            out = replace(out, force_not_null=value)
        elif name == "force_null":
            assert isinstance(value, tuple)
            out = replace(out, force_null=value)
        else:
            raise c.error(f'option "{name}" not recognized')
    fmt = out.format
    if fmt == "csv":
        out = replace(
            out,
            delimiter=str(given.get("delimiter", ",")),
            null=str(given.get("null", "")),
            escape=str(given.get("escape", out.quote)),
        )
    else:
        for name in ("quote", "escape"):
            if name in given:
                raise FeatureNotSupported(f"COPY {name} available only in CSV mode")
        for name in ("force_quote", "force_not_null", "force_null"):
            if name in given:
                shown = name.replace("_", " ")
                raise FeatureNotSupported(f"COPY {shown} available only in CSV mode")
    if fmt == "binary":
        if out.header:
            raise FeatureNotSupported("cannot specify HEADER in BINARY mode")
        if "delimiter" in given or "null" in given:
            raise c.error("cannot specify DELIMITER or NULL in BINARY mode")
    if to and ("force_not_null" in given or "force_null" in given):
        which = "not null" if "force_not_null" in given else "null"
        raise FeatureNotSupported(f"COPY force {which} only available using COPY FROM")
    if not to and "force_quote" in given:
        raise FeatureNotSupported("COPY force quote only available using COPY TO")
    if out.delimiter in ("\n", "\r"):
        raise InvalidParameterValue("COPY delimiter cannot be newline or carriage return")
    if fmt == "csv" and out.delimiter == out.quote:
        raise InvalidParameterValue("COPY delimiter and quote must be different")
    if fmt != "binary" and out.delimiter in out.null:
        raise InvalidParameterValue("COPY delimiter must not appear in the NULL specification")
    return out
