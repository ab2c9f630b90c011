"""``CREATE SOURCE … FROM WEBHOOK``, as Materialize spells it::

    CREATE SOURCE w FROM WEBHOOK BODY FORMAT JSON | TEXT | BYTES [INCLUDE HEADERS]
        [CHECK (WITH (HEADERS, BODY AS b, SECRET s) decode(headers->>'x-sig', 'hex') =
                hmac(b, s, 'sha256'))];

The source has a ``body`` column (``jsonb``, ``text`` or ``bytea``) and, with INCLUDE HEADERS,
``headers`` (``jsonb``: an object of lower-case header names to values). Its CHECK is
:mod:`spate.sql.webhook_check`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sqlglot.tokenizer_core import TokenType

from spate.repr.desc import RelationDesc
from spate.repr.types import BYTES, JSONB, TEXT
from spate.sql import statements as st
from spate.sql.errors import FeatureNotSupported, SqlError, UndefinedObject
from spate.sql.parse import Cursor, Source, tokenize
from spate.sql.statement_planner import StatementPlanner
from spate.sql.webhook_check import Check, CheckInvalid

_BODY_TYPES: Final = {"json": JSONB, "text": TEXT, "bytes": BYTES}


@dataclass(frozen=True, slots=True)
class WebhookSpec:
    """What a webhook source accepts: its body format, whether it keeps headers, its CHECK."""

    body_format: str
    include_headers: bool
    check: Check | None

    def desc(self) -> RelationDesc:
        cols = [("body", _BODY_TYPES[self.body_format], False)]
        if self.include_headers:
            cols.append(("headers", JSONB, False))
        return RelationDesc.of(*cols)


def parse_webhook(c: Cursor, text: str) -> WebhookSpec:
    """After ``FROM WEBHOOK``: the rest of the statement."""
    c.expect("BODY", "FORMAT")
    at = c.here()
    fmt = c.word().lower()
    if fmt not in _BODY_TYPES:
        raise FeatureNotSupported(
            f"unknown webhook body format {fmt.upper() or '?'}; formats: JSON, TEXT, BYTES",
            position=at + 1,
            text=text,
        )
    c.i += 1
    include_headers = c.accept("INCLUDE", "HEADERS")
    check = None
    if c.accept("CHECK"):
        c.expect_token(TokenType.L_PAREN, "(")
        names: list[tuple[str, str]] = []
        if c.accept("WITH"):
            c.expect_token(TokenType.L_PAREN, "(")
            while True:
                if c.accept("HEADERS"):
                    what, default = "headers", "headers"
                elif c.accept("BODY"):
                    what, default = "body", "body"
                elif c.accept("SECRET"):
                    default = c.name("a secret name")
                    what = f"secret:{default}"
                else:
                    raise c.error("expected HEADERS, BODY or SECRET")
                alias = c.name("an alias") if c.accept("AS") else default
                c.accept("BYTES")
                names.append((alias, what))
                if not c.accept_token(TokenType.COMMA):
                    break
            c.expect_token(TokenType.R_PAREN, ")")
        start = c.here()
        depth = 0
        while True:
            tok = c.peek()
            if tok is None:
                raise c.error("expected ) closing CHECK")
            if tok.token_type is TokenType.L_PAREN:
                depth += 1
            elif tok.token_type is TokenType.R_PAREN:
                if depth == 0:
                    break
                depth -= 1
            c.i += 1
        end = c.here()
        c.i += 1
        check = Check(tuple(names), text[start:end].strip())
        try:
            check.parsed()
        except CheckInvalid as e:
            raise SqlError(str(e), position=start + 1, text=text, sqlstate="0A000") from None
    c.end()
    return WebhookSpec(fmt, include_headers, check)


def spec_of(sql: str) -> WebhookSpec | None:
    """The webhook spec of a ``CREATE SOURCE … FROM WEBHOOK`` statement (``None``: not one)."""
    source = Source(sql, 0, len(sql), "postgres")
    c = Cursor(source, tokenize(sql, 0, "postgres"))
    if not c.accept("CREATE", "SOURCE"):
        return None
    while not c.at_end() and not c.at_words("FROM", "WEBHOOK"):
        c.i += 1
    if not c.accept("FROM", "WEBHOOK"):
        return None
    return parse_webhook(c, sql)


def plan_source(p: StatementPlanner, name: str) -> st.CreateSource:
    spec = parse_webhook(p.cur, p.src.text)
    if spec.check is not None:
        for secret in spec.check.secrets():
            obj = p.catalog.lookup(secret)
            if obj is None or obj.kind != "secret":
                raise UndefinedObject(f'secret "{secret}" does not exist', text=p.src.text)
    return st.CreateSource(
        p.src.sql, name, "webhook", (("body format", spec.body_format),), None, None, spec.desc()
    )
