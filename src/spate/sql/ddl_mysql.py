"""MySQL (MariaDB) in ``CREATE CONNECTION`` and ``CREATE SOURCE``, as Materialize spells them::

    CREATE SECRET mysqlpass AS 'hunter2';
    CREATE CONNECTION my TO MYSQL (HOST 'db', PORT 3306, USER 'repl', PASSWORD SECRET mysqlpass);
    CREATE SOURCE shop FROM MYSQL CONNECTION my [(SERVER ID 4242)]
        FOR ALL TABLES | FOR TABLES (shop.orders, shop.items AS line_items);

Each upstream table becomes a subsource, named ``<source>_<table>`` unless ``AS`` names it.
"""

from __future__ import annotations

from sqlglot.tokenizer_core import TokenType

from spate.sql import statements as st
from spate.sql.errors import FeatureNotSupported, SqlError
from spate.sql.statement_planner import StatementPlanner

CONNECTION_OPTIONS = {"HOST", "PORT", "USER", "PASSWORD SECRET"}
SOURCE_OPTIONS = {"SERVER ID"}


def plan_source(p: StatementPlanner, name: str, connection: str) -> st.CreateSource:
    """The rest of ``CREATE SOURCE name FROM MYSQL CONNECTION connection …``."""
    c = p.cur
    options: list[tuple[str, str | int | bool]] = []
    if (tok := c.peek()) is not None and tok.token_type is TokenType.L_PAREN:
        for key, (value, pos) in c.options().items():
            if key not in SOURCE_OPTIONS:
                raise FeatureNotSupported(
                    f"unknown MySQL source option {key}; options: SERVER ID",
                    position=pos + 1,
                    text=p.src.text,
                )
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 2**32:
                raise SqlError(
                    "SERVER ID must be an integer in 1..4294967295",
                    position=pos + 1,
                    text=p.src.text,
                )
            options.append((key.lower(), value))
    tables: tuple[str, ...] | None
    names: list[tuple[str, str]] = []
    if c.accept("FOR", "ALL", "TABLES"):
        tables = None
    elif c.accept("FOR", "TABLES"):
        listed: list[str] = []
        c.expect_token(TokenType.L_PAREN, "(")
        while True:
            at = c.here()
            database = c.name("a database name")
            if not c.accept_token(TokenType.DOT):
                raise SqlError(
                    f"name the MySQL table as database.table, not {database!r}",
                    position=at + 1,
                    text=p.src.text,
                )
            table = f"{database}.{c.name('a table name')}"
            listed.append(table)
            if c.accept("AS"):
                names.append((table, c.name("a subsource name")))
            if not c.accept_token(TokenType.COMMA):
                break
        c.expect_token(TokenType.R_PAREN, ")")
        tables = tuple(listed)
    else:
        raise c.error("expected FOR ALL TABLES or FOR TABLES (database.table, …)")
    c.end()
    return st.CreateSource(
        p.src.sql,
        name,
        "mysql",
        tuple(sorted(options)),
        connection,
        tables,
        names=tuple(names),
    )
