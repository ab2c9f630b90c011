"""Statements: recognise each one and plan it against the catalog.

:func:`plan_one` turns one statement of the text into a :mod:`spate.sql.statements` value.
Queries go through :class:`~spate.sql.query.QueryPlanner`; the heads of Materialize's own
statements are read by :class:`~spate.sql.parse.Cursor`; tables, views, indexes and clusters
are created, dropped and altered in :mod:`spate.sql.objects`, sources, sinks, secrets and
connections in :mod:`spate.sql.ddl`.
"""

from __future__ import annotations

import datetime as dt

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

from spate.plan.expr import ColumnRef, Literal, ScalarExpr
from spate.plan.recursive import DEFAULT_MAX_ITERATIONS
from spate.plan.relation import Filter, Get, Map, RelationExpr
from spate.sql import statements as st
from spate.sql.catalog import Catalog, CatalogObject
from spate.sql.constraints import with_declared_keys
from spate.sql.declared import column_types
from spate.sql.errors import (
    FeatureNotSupported,
    SqlError,
    SqlSyntaxError,
    UndefinedTable,
)
from spate.sql.from_clause import table_function
from spate.sql.objects import plan_alter, plan_create, plan_drop, plan_refresh
from spate.sql.parse import Cursor, Source, find_top_level, parse_sql, position
from spate.sql.query import QueryPlanner
from spate.sql.scalar import ScalarBinder
from spate.sql.scope import Col, Scope
from spate.sql.select import plan_select

_QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES", "(", "TABLE"})


def _today() -> dt.date:
    """The current time (UTC, a naive ``datetime``, which is a ``date``) a one-off statement
    reads (``now()``, and the date for ``age(timestamp)``), once, when it is planned, as
    PostgreSQL reads it at the start of the transaction."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def plan_one(
    src: Source,
    tokens: list[Token],
    catalog: Catalog,
    recursion_limit: int = DEFAULT_MAX_ITERATIONS,
) -> st.Statement:
    """Plan one statement (``src``) against ``catalog``; ``recursion_limit`` bounds the rounds
    of each WITH RECURSIVE it plans (the session's ``SET recursion_limit``)."""
    try:
        return _Planner(src, tokens, catalog, recursion_limit).plan()
    except SqlError as e:
        raise e.located(None, src.text) from None


class _Planner:
    def __init__(
        self,
        src: Source,
        tokens: list[Token],
        catalog: Catalog,
        recursion_limit: int = DEFAULT_MAX_ITERATIONS,
    ) -> None:
        self.src = src
        self.tokens = tokens
        self.catalog = catalog
        self.recursion_limit = recursion_limit
        self.cur = Cursor(src, tokens)
        self.qp = QueryPlanner(
            catalog, src.text, src.dialect, select=plan_select, table_function=table_function
        )
        self.qp.recursion_limit = recursion_limit

    # -- dispatch -----------------------------------------------------------------------------

    def plan(self) -> st.Statement:
        c = self.cur
        self.check_commas()
        first = c.word()
        if first in ("SELECT", "WITH", "VALUES", "TABLE") or (
            c.peek() is not None and c.peek().token_type is TokenType.L_PAREN  # type: ignore[union-attr]
        ):
            return self.select()
        if first == "CREATE":
            return plan_create(self)
        if first == "DROP":
            return plan_drop(self)
        if first == "INSERT":
            return self.insert()
        if first == "UPDATE":
            return self.update()
        if first == "DELETE":
            return self.delete()
        if first == "SUBSCRIBE":
            return self.subscribe()
        if first in ("SET", "RESET"):
            return self.set_()
        if first == "SHOW":
            from spate.sql.show import plan_show

            return plan_show(self)
        if first == "EXPLAIN":
            return self.explain()
        if first == "ALTER":
            return plan_alter(self)
        if first == "REFRESH":
            return plan_refresh(self)
        if first == "COMMENT":
            from spate.sql.comment import plan_comment

            return plan_comment(self)
        if first in ("BEGIN", "COMMIT", "ROLLBACK", "START"):
            raise self.unsupported("transactions (BEGIN/COMMIT) are not supported")
        raise SqlSyntaxError(
            f'syntax error at or near "{tok.text if (tok := c.peek()) else ""}"',
            position=c.here() + 1,
            text=self.src.text,
        )

    def check_commas(self) -> None:
        """A comma before another comma, a closing parenthesis or FROM is a syntax error
        (sqlglot drops the empty item; PostgreSQL refuses it)."""
        for a, b in zip(self.tokens, self.tokens[1:], strict=False):
            if a.token_type is TokenType.COMMA and (
                b.token_type in (TokenType.COMMA, TokenType.R_PAREN, TokenType.FROM)
            ):
                raise SqlSyntaxError(
                    f'syntax error at or near "{b.text}": an empty item after ","',
                    position=a.start + 1,
                    text=self.src.text,
                )

    def unsupported(self, message: str) -> SqlError:
        return FeatureNotSupported(message, position=self.src.start + 1, text=self.src.text)

    # -- SELECT [AS OF] ---------------------------------------------------------------------------

    def select(self) -> st.Select:
        end, as_of = self.trailing_as_of(0)
        node = parse_sql(self.src, self.src.start, end)
        self.qp.today = _today()
        out = self.qp.query(node, None)
        return st.Select(
            self.src.sql,
            with_declared_keys(out.rel.expr, self.catalog, node),
            tuple(out.names),
            tuple(out.order_by),
            out.limit,
            out.offset,
            as_of,
            tuple(t.name for t in out.types[: len(out.names)]),
        )

    def trailing_as_of(self, start: int) -> tuple[int, int | None]:
        """The end of the query before a trailing ``AS OF t`` and ``t``."""
        i = find_top_level(self.tokens, start, "AS", "OF")
        if i is None:
            return self.src.end, None
        cur = Cursor(self.src, self.tokens)
        cur.i = i + 2
        cur.accept("AT", "LEAST")
        value = cur.integer("a timestamp (milliseconds)")
        cur.end()
        return self.tokens[i].start, value

    # -- DML ------------------------------------------------------------------------------------

    def table_object(self, name: str, node: exp.Expression | None) -> CatalogObject:
        obj = self.catalog.lookup(name)
        if obj is None:
            raise UndefinedTable(
                f'relation "{name}" does not exist', position=position(node), text=self.src.text
            )
        if obj.kind != "table" or obj.desc is None or obj.id is None:
            raise SqlError(
                f'cannot change {obj.kind} "{name}": only tables take writes',
                position=position(node),
                text=self.src.text,
                sqlstate="42809",
            )
        return obj

    def insert(self) -> st.Insert:
        from spate.sql.dml import plan_insert

        self.qp.today = _today()
        return plan_insert(self)

    def update(self) -> st.Update:
        from spate.sql.dml import plan_update

        self.qp.today = _today()
        return plan_update(self)

    def delete(self) -> st.Delete:
        self.qp.today = _today()
        node = parse_sql(self.src, self.src.start)
        assert isinstance(node, exp.Delete)
        if node.args.get("using"):
            raise self.unsupported("DELETE … USING is not supported")
        table = node.this
        obj = self.table_object(table.name, table)
        assert obj.desc is not None and obj.id is not None
        get = Get(obj.id, obj.desc)
        alias = table.alias or table.name
        scope = Scope(
            [
                Col(c.name, alias, t)
                for c, t in zip(obj.desc.columns, column_types(obj), strict=True)
            ],
            None,
            self.src.text,
        )
        plan: RelationExpr = get
        where = node.args.get("where")
        if where is not None:
            plan = self.filter_where(plan, scope, where.this)
        return st.Delete(self.src.sql, obj.name, plan)

    def filter_where(self, plan: RelationExpr, scope: Scope, cond: exp.Expression) -> RelationExpr:
        from spate.sql.scope import Rel
        from spate.sql.select import has_subquery
        from spate.sql.subquery import SubqueryPlanner

        self.qp.allow_now = False
        if has_subquery(cond):
            rel = SubqueryPlanner(self.qp).where(Rel(plan, scope), cond)
            return rel.expr
        b = ScalarBinder(
            scope, text=self.src.text, dialect=self.src.dialect, clause="WHERE", today=self.qp.today
        )
        return Filter(plan, (b.predicate(cond),))

    # -- SUBSCRIBE ------------------------------------------------------------------------------

    def subscribe(self) -> st.Subscribe:
        c = self.cur
        c.expect("SUBSCRIBE")
        c.accept("TO")
        as_of = up_to = None
        snapshot = True
        if c.peek() is not None and c.peek().token_type is TokenType.L_PAREN:  # type: ignore[union-attr]
            start = c.here()
            c.skip_parens()
            end = self.tokens[c.i - 1].end + 1
            node = parse_sql(self.src, start, end)
            out = self.qp.relation(node)
            plan = out.rel.expr
            names = tuple(out.names)
            types = tuple(t.name for t in out.types[: len(names)])
        else:
            at = c.here()
            name = c.dotted_name("an object name")
            obj = self.readable(name, at)
            assert obj.desc is not None and obj.id is not None
            plan = Get(obj.id, obj.desc)
            names = obj.desc.names
            types = tuple(t.name for t in column_types(obj))
        while not c.at_end():
            if c.accept("AS", "OF"):
                c.accept("AT", "LEAST")
                as_of = c.integer("a timestamp (milliseconds)")
            elif c.accept("UP", "TO"):
                up_to = c.integer("a timestamp (milliseconds)")
            elif c.accept("WITH"):
                opts = c.options()
                for key, (value, pos) in opts.items():
                    if key == "SNAPSHOT":
                        snapshot = value is True or str(value).lower() in ("true", "on", "1")
                    elif key == "PROGRESS":
                        raise FeatureNotSupported(
                            "SUBSCRIBE … WITH (PROGRESS) is not supported",
                            position=pos + 1,
                            text=self.src.text,
                        )
                    else:
                        raise FeatureNotSupported(
                            f"unknown SUBSCRIBE option {key}", position=pos + 1, text=self.src.text
                        )
            elif c.accept("ENVELOPE"):
                raise self.unsupported("SUBSCRIBE … ENVELOPE is not supported")
            else:
                raise c.error("expected AS OF, UP TO or WITH (…)")
        return st.Subscribe(self.src.sql, plan, tuple(names), as_of, up_to, snapshot, types)

    def readable(self, name: str, at: int) -> CatalogObject:
        obj = self.catalog.lookup(name)
        if obj is None:
            raise UndefinedTable(
                f'relation "{name}" does not exist', position=at + 1, text=self.src.text
            )
        if not obj.readable:
            raise SqlError(
                f'{obj.kind} "{name}" cannot be read',
                position=at + 1,
                text=self.src.text,
                sqlstate="42809",
            )
        return obj

    # -- SET / EXPLAIN ----------------------------------------------------------------------------

    def set_(self) -> st.SetVariable:
        c = self.cur
        if c.accept("RESET"):
            name = c.name("a variable name")
            c.end()
            return st.SetVariable(self.src.sql, name, None)
        c.expect("SET")
        c.accept("SESSION") or c.accept("LOCAL")
        if c.accept("TRANSACTION", "ISOLATION", "LEVEL"):
            words = []
            while not c.at_end():
                words.append(c.word().lower())
                c.i += 1
            return st.SetVariable(self.src.sql, "transaction_isolation", " ".join(words))
        name = c.name("a variable name")
        if not (c.accept_token(TokenType.EQ) or c.accept("TO")):
            raise c.error("expected = or TO")
        tok = c.peek()
        if tok is None:
            raise c.error("expected a value")
        if tok.token_type is TokenType.STRING:
            value = c.string()
        elif c.accept("DEFAULT"):
            c.end()
            return st.SetVariable(self.src.sql, name, None)
        else:
            value = str(c.value())
        c.end()
        return st.SetVariable(self.src.sql, name, value)

    def explain(self) -> st.Rows:
        c = self.cur
        c.expect("EXPLAIN")
        for words in (("OPTIMIZED", "PLAN"), ("PHYSICAL", "PLAN"), ("RAW", "PLAN"), ("PLAN",)):
            if c.accept(*words):
                break
        if c.accept("AS"):
            c.i += 1
        c.accept("FOR")
        explained: RelationExpr | None = None
        if c.at_words("CREATE"):
            sub = _Planner(
                Source(self.src.text, c.here(), self.src.end, self.src.dialect),
                self.tokens[c.i :],
                self.catalog,
                self.recursion_limit,
            )
            stmt = sub.plan()
            if isinstance(stmt, st.CreateView):
                plan = stmt.plan
            elif isinstance(stmt, st.CreateIndex):
                obj = self.readable(stmt.on, self.src.start)
                assert obj.id is not None and obj.desc is not None
                plan = Get(obj.id, obj.desc)
            else:
                raise self.unsupported("EXPLAIN applies to queries, views and indexes")
        else:
            if c.at_end():
                raise c.error("expected a query")
            sub = _Planner(
                Source(self.src.text, c.here(), self.src.end, self.src.dialect),
                self.tokens[c.i :],
                self.catalog,
                self.recursion_limit,
            )
            stmt = sub.plan()
            if not isinstance(stmt, st.Select):
                raise self.unsupported("EXPLAIN applies to queries, views and indexes")
            plan = stmt.plan
            explained = plan
        lines = plan.explain().splitlines()
        rows = tuple((line,) for line in lines)
        return st.Rows(self.src.sql, ("Optimized Plan",), rows, explained)


__all__ = ["_QUERY_STARTS", "ColumnRef", "Literal", "Map", "ScalarExpr", "plan_one"]
