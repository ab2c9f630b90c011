"""PostgreSQL's command tags (CommandComplete): the command a statement is, and its rows.

A statement's tag is read from the tokens it was split into (its leading keywords: ``CREATE
MATERIALIZED VIEW``, ``DROP TABLE``, ``ALTER INDEX``…) and the rows it wrote, matched or
removed: ``INSERT 0 n``, ``UPDATE n`` (rows matched), ``DELETE n``, ``SELECT n`` (a ``CREATE
TABLE … AS`` that wrote n rows), as PostgreSQL tags them. The environment records the tag of
each statement it runs (``Session.tag``); nothing reads the text again for it.
"""

from __future__ import annotations

from typing import Final

from sqlglot.tokenizer_core import TokenType

from spate.sql import Parsed

_SKIPPED: Final = frozenset({"OR", "REPLACE", "DEFAULT", "TEMPORARY", "TEMP", "UNIQUE"})
_TWO_WORDS: Final = (("MATERIALIZED", "VIEW"), ("CLUSTER", "REPLICA"))
_CONTROL: Final = {
    "BEGIN": "BEGIN",
    "START": "START TRANSACTION",
    "COMMIT": "COMMIT",
    "END": "COMMIT",
    "ROLLBACK": "ROLLBACK",
    "ABORT": "ROLLBACK",
    "SAVEPOINT": "SAVEPOINT",
    "RELEASE": "RELEASE",
}


def command_tag(parsed: Parsed, rows: int | None = None) -> str:
    """The tag of the statement ``parsed`` after it ran; ``rows``: how many rows an INSERT,
    UPDATE or DELETE wrote, matched or removed, or a CREATE TABLE … AS wrote."""
    words = [
        "" if t.token_type in (TokenType.IDENTIFIER, TokenType.STRING) else t.text.upper()
        for t in parsed.tokens
    ]
    head = words[0] if words else ""
    if head == "INSERT":
        return f"INSERT 0 {rows or 0}"
    if head in ("UPDATE", "DELETE"):
        return f"{head} {rows or 0}"
    if head in _CONTROL:
        return _CONTROL[head]
    if head == "SET" or head == "RESET":
        return head
    if head == "CREATE" and _table_as(parsed):
        return f"SELECT {rows}" if rows is not None else "CREATE TABLE AS"
    if head in ("CREATE", "DROP", "ALTER"):
        rest = [w for w in words[1:] if w not in _SKIPPED]
        if tuple(rest[:2]) in _TWO_WORDS:
            return f"{head} {rest[0]} {rest[1]}"
        return f"{head} {rest[0]}" if rest and rest[0] else head
    if head == "COMMENT":
        return "COMMENT"
    if head == "REFRESH":
        return "REFRESH MATERIALIZED VIEW"
    return head


def _table_as(parsed: Parsed) -> bool:
    """``CREATE TABLE [IF NOT EXISTS] name [(columns)] AS …`` (not a column list's types)."""
    tokens = parsed.tokens
    if len(tokens) < 3 or tokens[1].text.upper() != "TABLE":
        return False
    depth = 0
    for tok in tokens[2:]:
        if tok.token_type is TokenType.L_PAREN:
            depth += 1
        elif tok.token_type is TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and tok.token_type is TokenType.ALIAS:
            return True
    return False
