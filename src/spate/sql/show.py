"""SHOW: variables, objects of a kind, COLUMNS, CREATE."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.sql import statements as st
from spate.sql.declared import column_types
from spate.sql.errors import UndefinedTable
from spate.sql.statement_planner import StatementPlanner
from spate.sql.types import display_name, from_scalar

if TYPE_CHECKING:
    from spate.sql.catalog import CatalogObject

_PLURAL = {
    "TABLES": "table",
    "VIEWS": "view",
    "SOURCES": "source",
    "SUBSOURCES": "subsource",
    "SINKS": "sink",
    "INDEXES": "index",
    "SECRETS": "secret",
    "CONNECTIONS": "connection",
    "OBJECTS": "",
}


def plan_show(p: StatementPlanner) -> st.Statement:
    c = p.cur
    c.expect("SHOW")
    if c.accept("MATERIALIZED", "VIEWS"):
        return _objects(p, "materialized view")
    if c.accept("CLUSTER", "REPLICAS"):
        c.end()
        return st.ShowObjects(p.src.sql, "cluster replica")
    if c.accept("CLUSTERS"):
        c.end()
        return st.ShowObjects(p.src.sql, "cluster")
    word = c.word()
    if word in _PLURAL:
        c.i += 1
        return _objects(p, _PLURAL[word])
    if c.accept("COLUMNS"):
        if not (c.accept("FROM") or c.accept("IN")):
            raise c.error("expected FROM")
        at = c.here()
        name = c.dotted_name("an object name")
        c.end()
        obj = p.catalog.lookup(name)
        if obj is None or obj.desc is None:
            raise UndefinedTable(
                f'relation "{name}" does not exist', position=at + 1, text=p.src.text
            )
        rows = tuple(
            (col.name, col.nullable, display_name(t))
            for col, t in zip(obj.desc.columns, column_types(obj), strict=True)
        )
        return st.Rows(p.src.sql, ("name", "nullable", "type"), rows)
    if c.accept("CREATE"):
        c.i += 1
        if c.word(-1) == "MATERIALIZED":
            c.expect("VIEW")
        at = c.here()
        name = c.dotted_name("an object name")
        c.end()
        obj = p.catalog.lookup(name)
        if obj is None:
            raise UndefinedTable(f'"{name}" does not exist', position=at + 1, text=p.src.text)
        sql = obj.create_sql or _python_create_sql(obj)
        return st.Rows(p.src.sql, ("name", "create_sql"), ((name, sql),))
    if c.accept("ALL"):
        c.end()
        return st.ShowVariable(p.src.sql, "all")
    name = c.name("a variable name")
    if c.accept("ISOLATION", "LEVEL"):
        name = "transaction_isolation"
    c.end()
    return st.ShowVariable(p.src.sql, name)


def _quote(name: str) -> str:
    if name.isidentifier() and name == name.lower():
        return name
    return '"' + name.replace('"', '""') + '"'


def _python_create_sql(obj: CatalogObject) -> str:
    """An equivalent CREATE statement for an object made through the Python API: a table's
    columns and types; for other kinds (whose definition is a Python plan) a comment saying so."""
    if obj.kind == "table" and obj.desc is not None:
        cols = ", ".join(
            f"{_quote(c.name)} {display_name(from_scalar(c.type))}"
            + ("" if c.nullable else " NOT NULL")
            for c in obj.desc.columns
        )
        return f"CREATE TABLE {_quote(obj.name)} ({cols})"
    if obj.kind == "index" and obj.on is not None:
        key = ", ".join(_quote(k) for k in obj.key)
        cluster = f" IN CLUSTER {_quote(obj.cluster)}" if obj.cluster else ""
        return f"CREATE INDEX {_quote(obj.name)}{cluster} ON {_quote(obj.on)} ({key})"
    return (
        f"-- {obj.kind} {obj.name} was created through the Python API: its definition is a "
        "plan, not SQL"
    )


def _objects(p: StatementPlanner, kind: str) -> st.Statement:
    c = p.cur
    on = None
    if c.accept("FROM") or c.accept("ON") or c.accept("IN"):
        if c.accept("CLUSTER"):
            on = c.name("a cluster name")
        else:
            on = c.dotted_name("a name")
    c.end()
    rows: list[tuple[str | None, ...]] = []
    for obj in sorted(p.catalog.objects(), key=lambda o: o.name):
        if kind and obj.kind != kind:
            continue
        if (
            on is not None
            and on not in (obj.on, obj.cluster)
            and kind in ("index", "materialized view")
        ):
            continue
        if kind == "index":
            rows.append((obj.name, obj.on, obj.cluster, ", ".join(obj.key)))
        elif kind == "materialized view":
            rows.append((obj.name, obj.cluster))
        elif kind:
            rows.append((obj.name,))
        else:
            rows.append((obj.name, obj.kind))
    names: tuple[str, ...]
    if kind == "index":
        names = ("name", "on", "cluster", "key")
    elif kind == "materialized view":
        names = ("name", "cluster")
    elif kind:
        names = ("name",)
    else:
        names = ("name", "type")
    return st.Rows(p.src.sql, names, tuple(rows))
