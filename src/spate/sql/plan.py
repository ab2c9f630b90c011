"""Statements: recognise each one and plan it against the catalog.

:func:`plan_one` turns one statement of the text into a :mod:`spate.sql.statements` value.
Queries go through :class:`~spate.sql.query.QueryPlanner`; the heads of Materialize's own
statements are read by :class:`~spate.sql.parse.Cursor`; sources, sinks, secrets and
connections are in :mod:`spate.sql.ddl`.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

from spate.plan.expr import ColumnRef, Literal, ScalarExpr
from spate.plan.relation import Filter, Get, Map, RelationExpr
from spate.repr.desc import Column, RelationDesc
from spate.sql import statements as st
from spate.sql.catalog import Catalog, CatalogObject
from spate.sql.errors import (
    DependentObjects,
    DuplicateColumn,
    DuplicateObject,
    FeatureNotSupported,
    SqlError,
    SqlSyntaxError,
    UndefinedColumn,
    UndefinedObject,
    UndefinedTable,
)
from spate.sql.parse import Cursor, Source, find_top_level, parse_sql, position
from spate.sql.query import QueryPlanner
from spate.sql.relops import rename
from spate.sql.scalar import ScalarBinder, type_from_ast
from spate.sql.scope import Col, Scope
from spate.sql.types import from_scalar

_QUERY_STARTS = frozenset({"SELECT", "WITH", "VALUES", "(", "TABLE"})
_KINDS = {
    "TABLE": "table",
    "TABLES": "table",
    "VIEW": "view",
    "VIEWS": "view",
    "MATERIALIZED": "materialized view",
    "INDEX": "index",
    "INDEXES": "index",
    "SOURCE": "source",
    "SOURCES": "source",
    "SUBSOURCES": "subsource",
    "SINK": "sink",
    "SINKS": "sink",
    "SECRET": "secret",
    "SECRETS": "secret",
    "CONNECTION": "connection",
    "CONNECTIONS": "connection",
}


def plan_one(src: Source, tokens: list[Token], catalog: Catalog) -> st.Statement:
    """Plan one statement (``src``) against ``catalog``."""
    try:
        return _Planner(src, tokens, catalog).plan()
    except SqlError as e:
        raise e.located(None, src.text) from None


class _Planner:
    def __init__(self, src: Source, tokens: list[Token], catalog: Catalog) -> None:
        self.src = src
        self.tokens = tokens
        self.catalog = catalog
        self.cur = Cursor(src, tokens)
        self.qp = QueryPlanner(catalog, src.text, src.dialect)

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
            return self.create()
        if first == "DROP":
            return self.drop()
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
            return self.alter()
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
        out = self.qp.query(node, None)
        return st.Select(
            self.src.sql,
            out.rel.expr,
            tuple(out.names),
            tuple(out.order_by),
            out.limit,
            out.offset,
            as_of,
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

    # -- CREATE ---------------------------------------------------------------------------------

    def create(self) -> st.Statement:
        c = self.cur
        c.expect("CREATE")
        replace = c.accept("OR", "REPLACE")
        if c.at_words("MATERIALIZED", "VIEW") or c.at_words("VIEW"):
            return self.create_view(replace)
        if c.at_words("TEMPORARY") or c.at_words("TEMP"):
            raise self.unsupported("temporary objects are not supported")
        if replace:
            raise c.error("expected VIEW or MATERIALIZED VIEW after OR REPLACE")
        if c.at_words("TABLE"):
            return self.create_table()
        if c.at_words("DEFAULT", "INDEX") or c.at_words("INDEX"):
            return self.create_index()
        if c.at_words("CLUSTER", "REPLICA"):
            c.expect("CLUSTER", "REPLICA")
            cluster = c.name("a cluster name")
            c.expect_token(TokenType.DOT, ".")
            name = c.name("a replica name")
            if not c.at_end():
                c.options()
            c.end()
            return st.CreateClusterReplica(self.src.sql, cluster, name)
        if c.at_words("CLUSTER"):
            return self.create_cluster()
        if c.word() in ("SOURCE", "SINK", "SECRET", "CONNECTION"):
            from spate.sql.ddl import plan_create_external

            return plan_create_external(self)
        raise c.error(
            "expected TABLE, VIEW, MATERIALIZED VIEW, INDEX, CLUSTER, SOURCE, SINK, "
            "SECRET or CONNECTION"
        )

    def create_table(self) -> st.CreateTable:
        node = parse_sql(self.src, self.src.start)
        assert isinstance(node, exp.Create)
        schema = node.this
        if not isinstance(schema, exp.Schema):
            raise self.unsupported(
                "CREATE TABLE needs a column list (CREATE TABLE … AS is not supported)"
            )
        name = schema.this.name
        existing = self.catalog.lookup(name)
        if existing is not None and not node.args.get("exists"):
            raise DuplicateObject(
                f'{existing.kind} "{name}" already exists',
                position=position(schema.this),
                text=self.src.text,
            )
        columns: list[Column] = []
        seen: set[str] = set()
        for item in schema.expressions:
            if not isinstance(item, exp.ColumnDef):
                raise FeatureNotSupported(
                    f"table constraint {item.sql(dialect='postgres')} is not supported",
                    position=position(item),
                    text=self.src.text,
                )
            cname = item.name
            if cname in seen:
                raise DuplicateColumn(
                    f'column "{cname}" specified more than once',
                    position=position(item),
                    text=self.src.text,
                )
            seen.add(cname)
            kind = item.args.get("kind")
            if kind is None:
                raise SqlSyntaxError(f'column "{cname}" needs a type', position=position(item))
            try:
                t = type_from_ast(kind)
            except SqlError as e:
                raise e.located(position(item), self.src.text) from None
            if t.scalar is None:
                raise FeatureNotSupported(
                    f'column "{cname}": type {t} cannot be stored',
                    position=position(item),
                    text=self.src.text,
                )
            nullable = True
            for cons in item.args.get("constraints") or []:
                k = cons.args.get("kind")
                if isinstance(k, exp.NotNullColumnConstraint):
                    nullable = bool(k.args.get("allow_null"))
                else:
                    raise FeatureNotSupported(
                        f'column "{cname}": constraint {cons.sql(dialect="postgres")} is not '
                        "supported",
                        position=position(item),
                        text=self.src.text,
                    )
            columns.append(Column(cname, t.scalar, nullable))
        if not columns:
            raise self.unsupported("a table needs at least one column")
        if_not_exists = bool(node.args.get("exists"))
        return st.CreateTable(self.src.sql, name, RelationDesc(columns), if_not_exists)

    def create_view(self, replace: bool) -> st.CreateView:
        c = self.cur
        materialized = c.accept("MATERIALIZED")
        c.expect("VIEW")
        if_not_exists = c.accept("IF", "NOT", "EXISTS")
        name_at = c.here()
        name = c.dotted_name("a view name")
        col_names: list[str] = []
        if c.peek() is not None and c.peek().token_type is TokenType.L_PAREN:  # type: ignore[union-attr]
            col_names = c.name_list("a column name")
        cluster = None
        cluster_at = c.here()
        if c.accept("IN", "CLUSTER"):
            cluster_at = c.here()
            cluster = c.name("a cluster name")
        if c.at_words("WITH"):
            c.i += 1
            c.options()
        c.expect("AS")
        query_start = c.here()
        node = parse_sql(self.src, query_start)
        plan, names = self.view_plan(node, col_names)
        if cluster is not None and cluster not in self.catalog.cluster_names():
            raise UndefinedObject(
                f"unknown cluster '{cluster}'", position=cluster_at + 1, text=self.src.text
            )
        existing = self.catalog.lookup(name)
        if existing is not None and not (replace or if_not_exists):
            raise DuplicateObject(
                f'{existing.kind} "{name}" already exists',
                position=name_at + 1,
                text=self.src.text,
            )
        del names
        return st.CreateView(
            self.src.sql, name, plan, materialized, cluster, replace, if_not_exists
        )

    def view_plan(
        self, node: exp.Expression, col_names: list[str]
    ) -> tuple[RelationExpr, list[str]]:
        out = self.qp.relation(node)
        names = list(out.names)
        if col_names:
            if len(col_names) > len(names):
                raise SqlError(
                    "CREATE VIEW specifies more column names than columns",
                    position=self.src.start + 1,
                    text=self.src.text,
                )
            names = col_names + names[len(col_names) :]
        dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if dup is not None:
            raise DuplicateColumn(
                f'column "{dup}" specified more than once',
                position=self.src.start + 1,
                text=self.src.text,
            )
        return rename(out.rel.expr, names), names

    def create_index(self) -> st.CreateIndex:
        c = self.cur
        default = c.accept("DEFAULT")
        c.expect("INDEX")
        if_not_exists = c.accept("IF", "NOT", "EXISTS")
        name: str | None = None
        if not c.at_words("ON") and not c.at_words("IN", "CLUSTER"):
            name = c.name("an index name")
        cluster = None
        cluster_at = c.here()
        if c.accept("IN", "CLUSTER"):
            cluster_at = c.here()
            cluster = c.name("a cluster name")
        c.expect("ON")
        at = c.here()
        on = c.dotted_name("an object name")
        obj = self.readable(on, at)
        assert obj.desc is not None
        c.accept("USING", "ARRANGEMENT")
        key: list[str] = []
        if c.peek() is not None and c.peek().token_type is TokenType.L_PAREN:  # type: ignore[union-attr]
            key_at = c.here()
            key = c.name_list("a column name")
            for k in key:
                if k not in obj.desc.names:
                    raise UndefinedColumn(
                        f'column "{k}" does not exist in {obj.kind} "{on}"',
                        position=key_at + 1,
                        text=self.src.text,
                    )
        elif not default:
            raise c.error("expected a column list (or CREATE DEFAULT INDEX)")
        if c.at_words("WITH"):
            c.i += 1
            c.options()
        c.end()
        if default and not key:
            key = list(obj.desc.names)
        if name is None:
            name = f"{on}_primary_idx" if default else f"{on}_{'_'.join(key)}_idx"
        if cluster is not None and cluster not in self.catalog.cluster_names():
            raise UndefinedObject(
                f"unknown cluster '{cluster}'", position=cluster_at + 1, text=self.src.text
            )
        return st.CreateIndex(self.src.sql, name, on, tuple(key), cluster, if_not_exists)

    def create_cluster(self) -> st.CreateCluster:
        c = self.cur
        c.expect("CLUSTER")
        name = c.name("a cluster name")
        paren = c.accept_token(TokenType.L_PAREN)
        replicas: list[str] | None = None
        while not c.at_end() and not (paren and c.peek().token_type is TokenType.R_PAREN):  # type: ignore[union-attr]
            if c.accept("REPLICAS"):
                c.expect_token(TokenType.L_PAREN, "(")
                replicas = []
                while (tok := c.peek()) is not None and tok.token_type is not TokenType.R_PAREN:
                    replicas.append(c.name("a replica name"))
                    if c.peek() is not None and c.peek().token_type is TokenType.L_PAREN:  # type: ignore[union-attr]
                        c.skip_parens()
                    if not c.accept_token(TokenType.COMMA):
                        break
                c.expect_token(TokenType.R_PAREN, ")")
            elif c.accept("REPLICATION", "FACTOR"):
                c.accept_token(TokenType.EQ)
                n = c.integer("a replica count")
                replicas = [f"r{i}" for i in range(1, n + 1)]
            elif c.accept("SIZE"):
                c.accept_token(TokenType.EQ)
                c.value()
            else:
                raise c.error("expected REPLICAS (…), REPLICATION FACTOR n or SIZE")
            c.accept_token(TokenType.COMMA)
        if paren:
            c.expect_token(TokenType.R_PAREN, ")")
        c.end()
        return st.CreateCluster(
            self.src.sql, name, tuple(replicas) if replicas is not None else None
        )

    # -- DROP -----------------------------------------------------------------------------------

    def drop(self) -> st.Statement:
        c = self.cur
        c.expect("DROP")
        if c.accept("CLUSTER", "REPLICA"):
            if_exists = c.accept("IF", "EXISTS")
            cluster = c.name("a cluster name")
            c.expect_token(TokenType.DOT, ".")
            replica = c.name("a replica name")
            c.end()
            return st.DropClusterReplica(self.src.sql, cluster, replica, if_exists)
        if c.accept("CLUSTER"):
            if_exists = c.accept("IF", "EXISTS")
            name = c.name("a cluster name")
            cascade = c.accept("CASCADE")
            c.accept("RESTRICT")
            c.end()
            if name not in self.catalog.cluster_names() and not if_exists:
                raise UndefinedObject(
                    f"unknown cluster '{name}'", position=self.src.start + 1, text=self.src.text
                )
            return st.DropCluster(self.src.sql, name, if_exists, cascade)
        word = c.word()
        kind = _KINDS.get(word)
        if kind is None:
            raise c.error(
                "expected TABLE, VIEW, MATERIALIZED VIEW, INDEX, SOURCE, SINK, SECRET, "
                "CONNECTION or CLUSTER"
            )
        c.i += 1
        if kind == "materialized view":
            c.expect("VIEW")
        if_exists = c.accept("IF", "EXISTS")
        names: list[str] = []
        positions: list[int] = []
        while True:
            at = c.here()
            name = c.dotted_name("an object name")
            obj = self.catalog.lookup(name)
            if obj is None:
                if not if_exists:
                    raise UndefinedTable(
                        f'{kind} "{name}" does not exist', position=at + 1, text=self.src.text
                    )
            elif obj.kind != kind and not (kind == "source" and obj.kind == "subsource"):
                raise SqlError(
                    f'"{name}" is a {obj.kind}, not a {kind}',
                    position=at + 1,
                    text=self.src.text,
                    sqlstate="42809",
                )
            else:
                names.append(name)
                positions.append(at)
            if not c.accept_token(TokenType.COMMA):
                break
        cascade = c.accept("CASCADE")
        c.accept("RESTRICT")
        c.end()
        if not cascade:
            for name, at in zip(names, positions, strict=True):
                obj = self.catalog.lookup(name)
                others = [d for d in (obj.dependents if obj else ()) if d not in names]
                if others:
                    raise DependentObjects(
                        f'cannot drop {kind} "{name}": {", ".join(others)} depend on it',
                        position=at + 1,
                        text=self.src.text,
                        hint="use DROP … CASCADE to drop the dependent objects too",
                    )
        return st.DropObjects(self.src.sql, kind, tuple(names), cascade)

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

        return plan_insert(self)

    def update(self) -> st.Update:
        from spate.sql.dml import plan_update

        return plan_update(self)

    def delete(self) -> st.Delete:
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
            [Col(c.name, alias, from_scalar(c.type)) for c in obj.desc.columns], None, self.src.text
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
        b = ScalarBinder(scope, text=self.src.text, dialect=self.src.dialect, clause="WHERE")
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
        else:
            at = c.here()
            name = c.dotted_name("an object name")
            obj = self.readable(name, at)
            assert obj.desc is not None and obj.id is not None
            plan = Get(obj.id, obj.desc)
            names = obj.desc.names
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
        return st.Subscribe(self.src.sql, plan, tuple(names), as_of, up_to, snapshot)

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

    # -- SET / EXPLAIN / ALTER --------------------------------------------------------------------

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
        if c.at_words("CREATE"):
            sub = _Planner(
                Source(self.src.text, c.here(), self.src.end, self.src.dialect),
                self.tokens[c.i :],
                self.catalog,
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
            )
            stmt = sub.plan()
            if not isinstance(stmt, st.Select):
                raise self.unsupported("EXPLAIN applies to queries, views and indexes")
            plan = stmt.plan
        lines = plan.explain().splitlines()
        return st.Rows(self.src.sql, ("Optimized Plan",), tuple((line,) for line in lines))

    def alter(self) -> st.AlterRetainHistory:
        c = self.cur
        c.expect("ALTER")
        word = c.word()
        if word not in _KINDS:
            raise c.error("expected TABLE, MATERIALIZED VIEW, SOURCE, INDEX…")
        c.i += 1
        if word == "MATERIALIZED":
            c.expect("VIEW")
        at = c.here()
        name = c.dotted_name("an object name")
        if self.catalog.lookup(name) is None:
            raise UndefinedTable(f'"{name}" does not exist', position=at + 1, text=self.src.text)
        if c.accept("RESET"):
            c.expect_token(TokenType.L_PAREN, "(")
            c.expect("RETAIN", "HISTORY")
            c.expect_token(TokenType.R_PAREN, ")")
            c.end()
            return st.AlterRetainHistory(self.src.sql, name, None)
        c.expect("SET")
        c.expect_token(TokenType.L_PAREN, "(")
        c.expect("RETAIN", "HISTORY")
        c.accept_token(TokenType.EQ)
        c.expect("FOR")
        at = c.here()
        text = c.string("a duration such as '1h'")
        c.expect_token(TokenType.R_PAREN, ")")
        c.end()
        from spate.sql.scalar import parse_interval

        binder = ScalarBinder(Scope([]), text=self.src.text)
        ms = parse_interval(text, exp.Literal.string(text), binder)
        if ms < 0:
            raise SqlError(
                "RETAIN HISTORY must not be negative",
                position=at + 1,
                text=self.src.text,
                sqlstate="22023",
            )
        return st.AlterRetainHistory(self.src.sql, name, ms)


__all__ = ["_QUERY_STARTS", "ColumnRef", "Literal", "Map", "ScalarExpr", "plan_one"]
