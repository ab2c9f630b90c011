"""``COMMENT ON {TABLE|VIEW|MATERIALIZED VIEW|INDEX|SOURCE|SINK} name IS 'text' | NULL`` and
``COMMENT ON COLUMN relation.column IS …``, checked as PostgreSQL checks them: the object must
exist (42P01) and be of the kind named (42809), the column must exist (42703)."""

from __future__ import annotations

from sqlglot.tokenizer_core import TokenType

from spate.sql import statements as st
from spate.sql.errors import SqlError, UndefinedColumn, UndefinedTable
from spate.sql.statement_planner import StatementPlanner

_KINDS = {
    "TABLE": "table",
    "VIEW": "view",
    "MATERIALIZED": "materialized view",
    "INDEX": "index",
    "SOURCE": "source",
    "SINK": "sink",
    "COLUMN": "column",
}


def plan_comment(p: StatementPlanner) -> st.CommentOn:
    c = p.cur
    c.expect("COMMENT", "ON")
    kind = _KINDS.get(c.word())
    if kind is None:
        raise c.error("expected TABLE, VIEW, MATERIALIZED VIEW, INDEX, SOURCE, SINK or COLUMN")
    c.i += 1
    if kind == "materialized view":
        c.expect("VIEW")
    at = c.here()
    parts = [c.name("an object name")]
    while c.accept_token(TokenType.DOT):
        parts.append(c.name("an object name"))
    c.expect("IS")
    text: str | None = None
    if not c.accept("NULL"):
        text = c.string("the comment as a quoted string, or NULL")
    c.end()
    column = None
    if kind == "column":
        if len(parts) < 2:
            raise SqlError(
                "column name must be qualified", position=at + 1, text=p.src.text, sqlstate="42601"
            )
        column = parts[-1]
        parts = parts[:-1]
    name = parts[-1]
    obj = p.catalog.lookup(name)
    if obj is None:
        raise UndefinedTable(f'relation "{name}" does not exist', position=at + 1, text=p.src.text)
    fits = obj.kind == kind or (kind == "source" and obj.kind == "subsource")
    if kind == "column":
        fits = obj.desc is not None and obj.kind != "index"
    if not fits:
        what = kind if kind != "column" else "a relation with columns"
        article = "" if kind == "column" else ("an " if kind[0] in "aeiou" else "a ")
        raise SqlError(
            f'"{name}" is not {article}{what}', position=at + 1, text=p.src.text, sqlstate="42809"
        )
    if column is not None and (obj.desc is None or column not in obj.desc.names):
        raise UndefinedColumn(
            f'column "{column}" of relation "{name}" does not exist',
            position=at + 1,
            text=p.src.text,
        )
    return st.CommentOn(p.src.sql, name, column, text)
