"""CREATE, DROP and ALTER of tables, views, indexes and clusters (sources, sinks, secrets and
connections are in :mod:`spate.sql.ddl`)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from spate.plan.relation import RelationExpr
from spate.repr.desc import Column, RelationDesc
from spate.sql import statements as st
from spate.sql.catalog import CatalogObject
from spate.sql.constraints import read_constraints, with_declared_keys
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
from spate.sql.notices import notice
from spate.sql.parse import find_top_level, parse_sql, position
from spate.sql.relops import rename
from spate.sql.scalar import ScalarBinder, type_from_ast
from spate.sql.scope import Scope
from spate.sql.statement_planner import StatementPlanner
from spate.sql.types import PG_INTERVAL_VALUE, PG_TEXT, PgType, display_name

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
_DROP_KIND = {"subsource": "source"}
"""The DROP statement of a kind, where it is not the kind's own name."""


def plan_create(p: StatementPlanner) -> st.Statement:
    c = p.cur
    c.expect("CREATE")
    replace = c.accept("OR", "REPLACE")
    if c.at_words("MATERIALIZED", "VIEW") or c.at_words("VIEW"):
        return _create_view(p, replace)
    if c.at_words("TEMPORARY") or c.at_words("TEMP"):
        raise p.unsupported("temporary objects are not supported")
    if replace:
        raise c.error("expected VIEW or MATERIALIZED VIEW after OR REPLACE")
    if c.at_words("TABLE"):
        return _create_table(p)
    if c.at_words("DEFAULT", "INDEX") or c.at_words("INDEX") or c.at_words("UNIQUE", "INDEX"):
        return _create_index(p)
    if c.at_words("CLUSTER", "REPLICA"):
        c.expect("CLUSTER", "REPLICA")
        cluster = c.name("a cluster name")
        c.expect_token(TokenType.DOT, ".")
        name = c.name("a replica name")
        if not c.at_end():
            c.options()
        c.end()
        return st.CreateClusterReplica(p.src.sql, cluster, name)
    if c.at_words("CLUSTER"):
        return _create_cluster(p)
    if c.word() in ("SOURCE", "SINK", "SECRET", "CONNECTION"):
        from spate.sql.ddl import plan_create_external

        return plan_create_external(p)
    raise c.error(
        "expected TABLE, VIEW, MATERIALIZED VIEW, INDEX, CLUSTER, SOURCE, SINK, "
        "SECRET or CONNECTION"
    )


def _create_table(p: StatementPlanner) -> st.CreateTable | st.CreateTableAs | st.NoChange:
    with_data = True
    end = None
    for words, data in ((("WITH", "NO", "DATA"), False), (("WITH", "DATA"), True)):
        at = find_top_level(p.tokens, 0, *words)
        if at is not None and at + len(words) == len(p.tokens):
            end, with_data = p.tokens[at].start, data
            break
    node = parse_sql(p.src, p.src.start, end)
    assert isinstance(node, exp.Create)
    schema = node.this
    if node.expression is not None:
        return _create_table_as(p, node, with_data)
    if not isinstance(schema, exp.Schema):
        raise p.unsupported("CREATE TABLE needs a column list or AS and a query")
    name = schema.this.name
    existing = p.catalog.lookup(name)
    if existing is not None and not node.args.get("exists"):
        raise DuplicateObject(
            f'{existing.kind} "{name}" already exists',
            position=position(schema.this),
            text=p.src.text,
        )
    columns: list[Column] = []
    typed: list[tuple[str, PgType]] = []
    seen: set[str] = set()
    for item in schema.expressions:
        if not isinstance(item, exp.ColumnDef):
            continue  # a table constraint (below)
        cname = item.name
        if cname in seen:
            raise DuplicateColumn(
                f'column "{cname}" specified more than once',
                position=position(item),
                text=p.src.text,
            )
        seen.add(cname)
        kind = item.args.get("kind")
        if kind is None:
            raise SqlSyntaxError(f'column "{cname}" needs a type', position=position(item))
        try:
            t = type_from_ast(kind)
        except SqlError as e:
            raise e.located(position(item), p.src.text) from None
        if t.name == "interval":
            t = PG_INTERVAL_VALUE
        if t.scalar is None:
            raise FeatureNotSupported(
                f'column "{cname}": type {t} cannot be stored',
                position=position(item),
                text=p.src.text,
            )
        nullable = True
        for cons in item.args.get("constraints") or []:
            k = cons.args.get("kind")
            if isinstance(k, exp.NotNullColumnConstraint):
                nullable = bool(k.args.get("allow_null"))
        columns.append(Column(cname, t.scalar, nullable))
        typed.append((cname, t))
    if not columns:
        raise p.unsupported("a table needs at least one column")
    found = read_constraints(name, list(schema.expressions), typed, p.src.text)
    key = found.not_null
    columns = [dataclasses.replace(c, nullable=False) if c.name in key else c for c in columns]
    if_not_exists = bool(node.args.get("exists"))
    return st.CreateTable(p.src.sql, name, RelationDesc(columns), if_not_exists, found.all)


def _create_table_as(
    p: StatementPlanner, node: exp.Create, with_data: bool
) -> st.CreateTableAs | st.NoChange:
    """``CREATE TABLE [IF NOT EXISTS] name AS query [WITH [NO] DATA]``: a table with the
    query's column names and types (all nullable, as PostgreSQL makes them)."""
    target = node.this
    if isinstance(target, exp.Schema):
        raise p.unsupported("column names in CREATE TABLE … AS are not supported")
    name = target.name
    existing = p.catalog.lookup(name)
    if existing is not None:
        if node.args.get("exists"):
            notice("42P07", f'relation "{name}" already exists, skipping')
            return st.NoChange(p.src.sql)
        raise SqlError(
            f'relation "{name}" already exists',
            position=position(target),
            text=p.src.text,
            sqlstate="42P07",
        )
    p.qp.today = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    out = p.qp.relation(node.expression)
    names = list(out.names)
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise DuplicateColumn(
            f'column "{dup}" specified more than once', position=p.src.start + 1, text=p.src.text
        )
    plan = rename(out.rel.expr, names)
    columns: list[Column] = []
    declared: list[str] = []
    for col, t in zip(plan.desc.columns, out.types[: len(names)], strict=True):
        if t.name == "unknown":
            t = PG_TEXT  # an untyped literal is text, as PostgreSQL makes it
        if t.scalar is None:
            raise FeatureNotSupported(
                f'column "{col.name}": type {display_name(t)} cannot be stored (cast it)',
                position=p.src.start + 1,
                text=p.src.text,
            )
        columns.append(Column(col.name, col.type, True))
        declared.append(f"{_quote(col.name)} {display_name(t)}")
    create_sql = f"CREATE TABLE {_quote(name)} ({', '.join(declared)})"
    return st.CreateTableAs(p.src.sql, name, RelationDesc(columns), plan, with_data, create_sql)


def _quote(name: str) -> str:
    if name.isidentifier() and name == name.lower() and name.isascii():
        return name
    return '"' + name.replace('"', '""') + '"'


def _create_view(p: StatementPlanner, replace: bool) -> st.CreateView:
    c = p.cur
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
    node = parse_sql(p.src, query_start)
    plan, names, types = _view_plan(p, node, col_names)
    if cluster is not None and cluster not in p.catalog.cluster_names():
        raise UndefinedObject(
            f"unknown cluster '{cluster}'", position=cluster_at + 1, text=p.src.text
        )
    existing = p.catalog.lookup(name)
    if existing is not None and not (replace or if_not_exists):
        raise DuplicateObject(
            f'{existing.kind} "{name}" already exists',
            position=name_at + 1,
            text=p.src.text,
        )
    del names
    plan = with_declared_keys(plan, p.catalog, node)
    return st.CreateView(
        p.src.sql, name, plan, materialized, cluster, replace, if_not_exists, types
    )


def _view_plan(
    p: StatementPlanner, node: exp.Expression, col_names: list[str]
) -> tuple[RelationExpr, list[str], tuple[str, ...]]:
    out = p.qp.relation(node)
    names = list(out.names)
    if col_names:
        if len(col_names) > len(names):
            raise SqlError(
                "CREATE VIEW specifies more column names than columns",
                position=p.src.start + 1,
                text=p.src.text,
            )
        names = col_names + names[len(col_names) :]
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise DuplicateColumn(
            f'column "{dup}" specified more than once',
            position=p.src.start + 1,
            text=p.src.text,
        )
    plan = rename(out.rel.expr, names)
    return plan, names, tuple(t.name for t in out.types[: len(names)])


def _create_index(p: StatementPlanner) -> st.CreateIndex:
    c = p.cur
    unique = c.accept("UNIQUE")
    default = not unique and c.accept("DEFAULT")
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
    obj = p.readable(on, at)
    assert obj.desc is not None
    c.accept("USING", "ARRANGEMENT")
    key: list[str] = []
    if c.peek() is not None and c.peek().token_type is TokenType.L_PAREN:  # type: ignore[union-attr]
        key_at = c.here()
        key = _index_keys(p)
        for k in key:
            if k not in obj.desc.names:
                raise UndefinedColumn(
                    f'column "{k}" does not exist in {obj.kind} "{on}"',
                    position=key_at + 1,
                    text=p.src.text,
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
    if cluster is not None and cluster not in p.catalog.cluster_names():
        raise UndefinedObject(
            f"unknown cluster '{cluster}'", position=cluster_at + 1, text=p.src.text
        )
    if unique and obj.kind != "table":
        raise p.unsupported(f'a UNIQUE index must be on a table; "{on}" is a {obj.kind}')
    return st.CreateIndex(p.src.sql, name, on, tuple(key), cluster, if_not_exists, unique)


def _index_keys(p: StatementPlanner) -> list[str]:
    """``(a [ASC | DESC] [NULLS FIRST | LAST], …)``: the key columns (an arrangement has no
    order of its own, so the orderings are accepted and change nothing)."""
    c = p.cur
    c.expect_token(TokenType.L_PAREN, "(")
    out: list[str] = []
    while True:
        out.append(c.name("a column name"))
        if not c.accept("ASC"):
            c.accept("DESC")
        if c.accept("NULLS") and not c.accept("FIRST"):
            c.expect("LAST")
        if not c.accept_token(TokenType.COMMA):
            break
    c.expect_token(TokenType.R_PAREN, ")")
    return out


def _create_cluster(p: StatementPlanner) -> st.CreateCluster:
    c = p.cur
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
    return st.CreateCluster(p.src.sql, name, tuple(replicas) if replicas is not None else None)


def plan_drop(p: StatementPlanner) -> st.Statement:
    c = p.cur
    c.expect("DROP")
    if c.accept("CLUSTER", "REPLICA"):
        if_exists = c.accept("IF", "EXISTS")
        cluster = c.name("a cluster name")
        c.expect_token(TokenType.DOT, ".")
        replica = c.name("a replica name")
        c.end()
        return st.DropClusterReplica(p.src.sql, cluster, replica, if_exists)
    if c.accept("CLUSTER"):
        if_exists = c.accept("IF", "EXISTS")
        name = c.name("a cluster name")
        cascade = c.accept("CASCADE")
        c.accept("RESTRICT")
        c.end()
        if name not in p.catalog.cluster_names() and not if_exists:
            raise UndefinedObject(
                f"unknown cluster '{name}'", position=p.src.start + 1, text=p.src.text
            )
        return st.DropCluster(p.src.sql, name, if_exists, cascade)
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
        obj = p.catalog.lookup(name)
        if obj is None:
            if not if_exists:
                raise UndefinedTable(
                    f'{kind} "{name}" does not exist', position=at + 1, text=p.src.text
                )
        elif obj.kind != kind and not (kind == "source" and obj.kind == "subsource"):
            raise SqlError(
                f'"{name}" is a {obj.kind}, not a {kind}',
                position=at + 1,
                text=p.src.text,
                hint=f"Use DROP {_DROP_KIND.get(obj.kind, obj.kind).upper()}"
                f" to remove a {obj.kind}.",
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
            obj = p.catalog.lookup(name)
            others = [
                d
                for d in (obj.dependents if obj else ())
                if d not in names and not _own_index(p, d, name)
            ]
            if others:
                what = [f"{_kind(p, d)} {d} depends on {kind} {name}" for d in others]
                raise DependentObjects(
                    f"cannot drop {kind} {name} because other objects depend on it",
                    position=at + 1,
                    text=p.src.text,
                    hint="Use DROP ... CASCADE to drop the dependent objects too.",
                    detail="\n".join(what),
                )
    return st.DropObjects(p.src.sql, kind, tuple(names), cascade)


def _own_index(p: StatementPlanner, dependent: str, table: str) -> bool:
    """``dependent`` is an index of table ``table``: PostgreSQL drops it with the table."""
    obj = p.catalog.lookup(dependent)
    owner = p.catalog.lookup(table)
    return (
        obj is not None
        and obj.kind == "index"
        and obj.on == table
        and owner is not None
        and owner.kind == "table"
    )


def _kind(p: StatementPlanner, name: str) -> str:
    obj = p.catalog.lookup(name)
    return obj.kind if obj is not None else "object"


_RELATIONS = frozenset({"table", "view", "materialized view", "index", "source", "subsource"})
"""What ``ALTER TABLE`` and ``ALTER INDEX`` rename: any relation, as in PostgreSQL."""


def plan_refresh(p: StatementPlanner) -> st.Statement:
    """``REFRESH MATERIALIZED VIEW [CONCURRENTLY] name [WITH [NO] DATA]``: spate's
    materialized views are always current (maintained at every time), so a refresh changes
    nothing; the name must still be a materialized view, as PostgreSQL checks (42P01; a view:
    42809; a table: 0A000).
    Tools written for PostgreSQL send it (dbt refreshes an unchanged materialized view model)."""
    c = p.cur
    c.expect("REFRESH", "MATERIALIZED", "VIEW")
    c.accept("CONCURRENTLY")
    at = c.here()
    name = c.dotted_name("a materialized view name")
    if c.accept("WITH"):
        c.accept("NO")
        c.expect("DATA")
    c.end()
    obj = p.catalog.lookup(name)
    if obj is None:
        raise UndefinedTable(f'relation "{name}" does not exist', position=at + 1, text=p.src.text)
    if obj.kind != "materialized view":
        raise SqlError(
            f'"{name}" is not a materialized view',
            position=at + 1,
            text=p.src.text,
            sqlstate="0A000" if obj.kind == "table" else "42809",  # as PostgreSQL 15 answers
        )
    return st.NoChange(p.src.sql)


def plan_alter(p: StatementPlanner) -> st.Statement:
    c = p.cur
    c.expect("ALTER")
    word = c.word()
    if word not in _KINDS:
        raise c.error("expected TABLE, MATERIALIZED VIEW, SOURCE, INDEX…")
    c.i += 1
    if word == "MATERIALIZED":
        c.expect("VIEW")
    kind = _KINDS[word]
    if_exists = c.accept("IF", "EXISTS")
    at = c.here()
    name = c.dotted_name("an object name")
    obj = p.catalog.lookup(name)
    if c.at_words("RENAME") or c.at_words("OWNER"):
        return _alter_relation(p, kind, name, obj, at, if_exists)
    if obj is None:
        raise UndefinedTable(f'"{name}" does not exist', position=at + 1, text=p.src.text)
    if c.accept("RESET"):
        c.expect_token(TokenType.L_PAREN, "(")
        c.expect("RETAIN", "HISTORY")
        c.expect_token(TokenType.R_PAREN, ")")
        c.end()
        return st.AlterRetainHistory(p.src.sql, name, None)
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

    binder = ScalarBinder(Scope([]), text=p.src.text)
    ms = parse_interval(text, exp.Literal.string(text), binder)
    if ms < 0:
        raise SqlError(
            "RETAIN HISTORY must not be negative",
            position=at + 1,
            text=p.src.text,
            sqlstate="22023",
        )
    return st.AlterRetainHistory(p.src.sql, name, ms)


def _alter_relation(
    p: StatementPlanner,
    kind: str,
    name: str,
    obj: CatalogObject | None,
    at: int,
    if_exists: bool,
) -> st.Statement:
    """``ALTER <kind> [IF EXISTS] name RENAME TO new`` and ``… OWNER TO role``, as PostgreSQL
    checks them: ``ALTER TABLE`` and ``ALTER INDEX`` take any relation, ``ALTER VIEW`` and
    ``ALTER MATERIALIZED VIEW`` only their own kind."""
    c = p.cur
    new: str | None = None
    new_at = c.here()
    if c.accept("RENAME"):
        if not c.accept("TO"):
            raise p.unsupported("ALTER … RENAME supports only RENAME TO (no RENAME COLUMN)")
        new_at = c.here()
        new = c.name("the new name")
    else:
        c.expect("OWNER", "TO")
        c.name("a role name")
    c.end()
    if obj is None:
        if not if_exists:
            raise UndefinedTable(
                f'relation "{name}" does not exist', position=at + 1, text=p.src.text
            )
        notice("00000", f'relation "{name}" does not exist, skipping')
        return st.NoChange(p.src.sql)
    if obj.kind in ("secret", "connection"):
        raise p.unsupported(f"ALTER of a {obj.kind} is not supported")
    fits = obj.kind in _RELATIONS if kind in ("table", "index") else obj.kind == kind
    if kind == "source":
        fits = obj.kind in ("source", "subsource")
    if not fits:
        raise SqlError(
            f'"{name}" is not {_article(kind)} {kind}',
            position=at + 1,
            text=p.src.text,
            sqlstate="42809",
        )
    if new is None:
        return st.NoChange(p.src.sql)
    if p.catalog.lookup(new) is not None:
        raise SqlError(
            f'relation "{new}" already exists',
            position=new_at + 1,
            text=p.src.text,
            sqlstate="42P07",
        )
    return st.RenameObject(p.src.sql, name, new)


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"
