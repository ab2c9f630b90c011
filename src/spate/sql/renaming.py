"""Stored statement texts after ``ALTER … RENAME TO``: the CREATE text of the renamed object
names it by its new name, and the texts of the objects that read it name it by its new name
where they name it as a relation, as PostgreSQL's ``pg_get_viewdef`` shows a renamed table.

The texts are rewritten token by token, keeping everything else as it was written: the
object's own name right after its ``CREATE <kind> [IF NOT EXISTS]``, and in a dependent's text
every name that refers to a relation: one right after ``FROM``, ``JOIN``, ``ON`` (an index's
object), ``TO`` (``SUBSCRIBE``), a ``,`` of a FROM list, or one that qualifies a column
(``old.col``, unless an alias is named ``old``). Where a name could be a column or a relation
and none of these say which, it is left alone; a text with a WITH query named ``old`` is left
as it is.
"""

from __future__ import annotations

from sqlglot.tokenizer_core import Token, TokenType

from spate.sql.parse import tokenize

_BEFORE_RELATION = frozenset({"FROM", "JOIN", "TO", "TABLE"})
_AFTER_ON = frozenset({"USING", "WITH", "IN"})
_END_FROM = frozenset(
    {"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "UNION", "EXCEPT", "INTERSECT",
     "WINDOW", "ON", "USING", "SELECT"}
)  # fmt: skip


def _folded(tok: Token) -> str | None:
    """The name a token denotes, if it can be one (keywords used as names included)."""
    if tok.token_type is TokenType.IDENTIFIER:
        return tok.text
    if tok.token_type in (TokenType.STRING, TokenType.NUMBER) or not tok.text[:1].isalpha():
        return None
    return tok.text.lower()


def _quoted(name: str) -> str:
    if name.isidentifier() and name == name.lower() and name.isascii():
        return name
    return '"' + name.replace('"', '""') + '"'


def _replace(text: str, tokens: list[Token], at: list[int], new: str) -> str:
    """``text`` with tokens ``at`` (a quoted identifier's span includes its quotes) replaced."""
    out = text
    for i in sorted(at, reverse=True):
        tok = tokens[i]
        out = out[: tok.start] + _quoted(new) + out[tok.end + 1 :]
    return out


def _tokens(text: str) -> list[Token] | None:
    try:
        return tokenize(text, 0, "postgres")
    except Exception:
        return None


def renamed_own(sql: str, old: str, new: str) -> str:
    """The CREATE text of an object renamed from ``old`` to ``new``: its name in the text
    (the first ``old`` in it, the name a CREATE gives) replaced."""
    tokens = _tokens(sql)
    if tokens is None:
        return sql
    for i, tok in enumerate(tokens):
        if _folded(tok) == old and (
            i + 1 >= len(tokens) or tokens[i + 1].token_type is not TokenType.DOT
        ):
            return _replace(sql, tokens, [i], new)
    return sql


def renamed_reference(sql: str, old: str, new: str) -> str:
    """The text of an object that reads relation ``old``, renamed ``new``: the names in it
    that refer to the relation replaced (see the module's notes)."""
    tokens = _tokens(sql)
    if tokens is None:
        return sql
    if any(  # a WITH query named old: the text's old is that query, left as it is
        _folded(t) == old
        and i + 2 < len(tokens)
        and tokens[i + 1].text.upper() == "AS"
        and tokens[i + 2].token_type is TokenType.L_PAREN
        for i, t in enumerate(tokens)
    ):
        return sql
    at: list[int] = []
    aliased = any(  # an alias named old: old.col refers to it, not to the relation
        _folded(t) == old and i and tokens[i - 1].text.upper() == "AS" for i, t in enumerate(tokens)
    )
    depth = 0
    in_from: dict[int, bool] = {}
    for i, tok in enumerate(tokens):
        word = tok.text.upper() if tok.token_type is not TokenType.IDENTIFIER else ""
        if tok.token_type is TokenType.L_PAREN:
            depth += 1
            in_from[depth] = False
            continue
        if tok.token_type is TokenType.R_PAREN:
            in_from.pop(depth, None)
            depth -= 1
            continue
        if word in ("FROM", "JOIN"):
            in_from[depth] = True
        elif word in _END_FROM:
            in_from[depth] = False
        if _folded(tok) != old:
            continue
        prev = tokens[i - 1] if i else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        prev_word = (
            prev.text.upper()
            if prev is not None and prev.token_type is not TokenType.IDENTIFIER
            else ""
        )
        if prev is not None and prev.token_type is TokenType.DOT:
            # schema.old, or a column old of something (a.old): a relation if more follows
            before = tokens[i - 2] if i >= 2 else None
            is_schema = before is not None and _folded(before) in ("public", "materialize")
            if is_schema:
                at.append(i)
            continue
        if nxt is not None and nxt.token_type is TokenType.DOT:
            if not aliased:
                at.append(i)
        elif prev_word == "ON" and prev is not None:
            # an index's object: CREATE INDEX i ON old (…); in a join, ON is a condition
            if nxt is None or nxt.token_type is TokenType.L_PAREN or nxt.text.upper() in _AFTER_ON:
                at.append(i)
        elif prev_word in _BEFORE_RELATION or (
            prev is not None and prev.token_type is TokenType.COMMA and in_from.get(depth)
        ):
            at.append(i)
    return _replace(sql, tokens, at, new) if at else sql
