"""The constraints of ``CREATE TABLE``, read from sqlglot's parse tree as PostgreSQL reads them.

Column form (``k int PRIMARY KEY``, ``v text UNIQUE``, ``w int CHECK (w > 0)``, each optionally
``CONSTRAINT name …``) and table form (``PRIMARY KEY (a, b)``, ``UNIQUE (a, b)``, ``CHECK
(…)``, ``CONSTRAINT name …``). Unnamed constraints get PostgreSQL's names: ``t_pkey``,
``t_a_b_key``, ``t_w_check`` (the one column a check reads; ``t_check`` when it reads none or
several), with ``1``, ``2``… appended on a clash. A primary key's columns are NOT NULL. A
UNIQUE on the same columns as an earlier key is the same constraint (PostgreSQL keeps one).
A CHECK is bound over the table's columns to a boolean expression kept with the table.

``DEFAULT`` expressions are not constraints: :func:`column_defaults` reads them back from the
table's ``CREATE TABLE`` text when an INSERT leaves a column out.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from spate.ids import GlobalId
from spate.plan.keys import simplify_with_keys
from spate.plan.relation import Distinct, Get, Reduce, RelationExpr
from spate.repr.desc import RelationDesc
from spate.sql import statements as st
from spate.sql.catalog import Catalog
from spate.sql.declared import column_defs
from spate.sql.errors import FeatureNotSupported, SqlError, UndefinedColumn
from spate.sql.parse import position
from spate.sql.scalar import ScalarBinder
from spate.sql.scope import Col, Scope
from spate.sql.types import PgType

_IGNORED = (exp.DefaultColumnConstraint, exp.NotNullColumnConstraint)


@dataclass
class TableConstraints:
    """The constraints of one ``CREATE TABLE`` as they are read."""

    table: str
    text: str
    keys: list[st.TableKey] = field(default_factory=list)
    checks: list[st.TableCheck] = field(default_factory=list)
    names: set[str] = field(default_factory=set)

    @property
    def not_null(self) -> set[str]:
        return {c for k in self.keys if k.primary for c in k.columns}

    @property
    def all(self) -> tuple[st.TableKey | st.TableCheck, ...]:
        return (*self.keys, *self.checks)


def read_constraints(
    table: str, items: list[exp.Expression], columns: list[tuple[str, PgType]], text: str
) -> TableConstraints:
    """The constraints of the ``CREATE TABLE`` items ``items`` (column definitions and table
    constraints) of a table with ``columns``."""
    out = TableConstraints(table, text)
    scope = Scope([Col(n, table, t) for n, t in columns], None, text)
    names = [n for n, _ in columns]
    for item in items:
        if isinstance(item, exp.ColumnDef):
            for cons in item.args.get("constraints") or []:
                kind = cons.args.get("kind")
                if isinstance(kind, _IGNORED):
                    continue
                given = cons.this.name if isinstance(cons.this, exp.Identifier) else None
                _one(out, kind, given, (item.name,), scope, names, item)
        elif isinstance(item, exp.Constraint):
            for kind in item.expressions:
                _one(out, kind, item.name, None, scope, names, item)
        else:
            _one(out, item, None, None, scope, names, item)
    return out


def _one(
    out: TableConstraints,
    kind: exp.Expression | None,
    given: str | None,
    column: tuple[str, ...] | None,
    scope: Scope,
    names: list[str],
    node: exp.Expression,
) -> None:
    if isinstance(kind, (exp.PrimaryKeyColumnConstraint, exp.PrimaryKey)):
        cols = column if column is not None else _key_columns(kind, out, names, node)
        if any(k.primary for k in out.keys):
            raise SqlError(
                f'multiple primary keys for table "{out.table}" are not allowed',
                position=position(node),
                text=out.text,
                sqlstate="42P16",
            )
        _add_key(out, given or _choose(out, f"{out.table}_pkey"), cols, primary=True, node=node)
    elif isinstance(kind, exp.UniqueColumnConstraint):
        if kind.this is not None:
            cols = _key_columns(kind.this, out, names, node)
        elif column is not None:
            cols = column
        else:
            raise SqlError("UNIQUE needs a column list", position=position(node), text=out.text)
        if any(k.columns == cols for k in out.keys):
            return  # the same key again: one constraint, as in PostgreSQL
        _add_key(out, given or _choose(out, f"{out.table}_{'_'.join(cols)}_key"), cols)
    elif isinstance(kind, exp.CheckColumnConstraint):
        cond = kind.this
        binder = ScalarBinder(scope, text=out.text, clause="CHECK")
        try:
            expr = binder.predicate(cond)
        except SqlError as e:
            raise e.located(position(node), out.text) from None
        read = sorted({c.name for c in cond.find_all(exp.Column)})
        if given is None:
            one = column[0] if column is not None and read == [column[0]] else None
            if one is None and len(read) == 1:
                one = read[0]
            given = _choose(out, f"{out.table}_{one}_check" if one else f"{out.table}_check")
        _unique_name(out, given, node)
        out.checks.append(st.TableCheck(given, expr, cond.sql(dialect="postgres")))
    else:
        shown = kind.sql(dialect="postgres") if kind is not None else node.sql(dialect="postgres")
        raise FeatureNotSupported(
            f"constraint {shown} is not supported", position=position(node), text=out.text
        )


def _key_columns(
    node: exp.Expression, out: TableConstraints, names: list[str], at: exp.Expression
) -> tuple[str, ...]:
    cols = tuple(e.name for e in node.expressions)
    for c in cols:
        if c not in names:
            raise UndefinedColumn(
                f'column "{c}" named in key does not exist', position=position(at), text=out.text
            )
    return cols


def _add_key(
    out: TableConstraints,
    name: str,
    cols: tuple[str, ...],
    *,
    primary: bool = False,
    node: exp.Expression | None = None,
) -> None:
    _unique_name(out, name, node)
    key = st.TableKey(name, cols, primary)
    if primary:
        out.keys = [key, *(k for k in out.keys if k.columns != cols)]
    else:
        out.keys.append(key)


def _unique_name(out: TableConstraints, name: str, node: exp.Expression | None) -> None:
    if name in out.names:
        raise SqlError(
            f'constraint "{name}" for relation "{out.table}" already exists',
            position=position(node) if node is not None else None,
            text=out.text,
            sqlstate="42710",
        )
    out.names.add(name)


def _choose(out: TableConstraints, name: str) -> str:
    """``name``, or ``name1``, ``name2``… if taken (PostgreSQL's ChooseConstraintName)."""
    if name not in out.names:
        return name
    n = 1
    while f"{name}{n}" in out.names:
        n += 1
    return f"{name}{n}"


@functools.lru_cache(maxsize=256)
def _defaults(create_sql: str) -> tuple[tuple[str, exp.Expression], ...]:
    out: list[tuple[str, exp.Expression]] = []
    for c in column_defs(create_sql):
        for cons in c.args.get("constraints") or []:
            kind = cons.args.get("kind")
            if isinstance(kind, exp.DefaultColumnConstraint):
                out.append((c.name, kind.this))
    return tuple(out)


def column_defaults(create_sql: str | None) -> dict[str, exp.Expression]:
    """The ``DEFAULT`` expression of each column of a table created in SQL that has one."""
    if not create_sql:
        return {}
    return {name: e.copy() for name, e in _defaults(create_sql)}


@functools.lru_cache(maxsize=256)
def _declared_keys(create_sql: str) -> tuple[tuple[tuple[str, ...], bool], ...]:
    """The PRIMARY KEY (``True``) and UNIQUE keys of a ``CREATE TABLE`` text, by column name."""
    try:
        node = sqlglot.parse_one(create_sql, read="postgres")
    except SqlglotError:
        return ()
    if not isinstance(node, exp.Create) or not isinstance(node.this, exp.Schema):
        return ()
    out: list[tuple[tuple[str, ...], bool]] = []
    for item in node.this.expressions:
        kinds: list[tuple[exp.Expression | None, tuple[str, ...] | None]] = []
        if isinstance(item, exp.ColumnDef):
            kinds = [(c.args.get("kind"), (item.name,)) for c in item.args.get("constraints") or []]
        elif isinstance(item, exp.Constraint):
            kinds = [(k, None) for k in item.expressions]
        else:
            kinds = [(item, None)]
        for kind, column in kinds:
            if isinstance(kind, (exp.PrimaryKeyColumnConstraint, exp.PrimaryKey)):
                cols = column or tuple(e.name for e in kind.expressions)
                out.append((cols, True))
            elif isinstance(kind, exp.UniqueColumnConstraint):
                inner = kind.this
                named = column if inner is None else tuple(e.name for e in inner.expressions)
                if named:
                    out.append((named, False))
    return tuple(out)


def declared_keys(create_sql: str | None, desc: RelationDesc) -> tuple[tuple[int, ...], ...]:
    """The keys the planner may rely on of a table created by ``create_sql`` with columns
    ``desc`` (:mod:`spate.plan.keys`): its PRIMARY KEY and its UNIQUE constraints on NOT NULL
    columns (rows with a NULL in a UNIQUE key may repeat), as column positions. Only those of
    ``CREATE TABLE``: they hold for the table's whole history and cannot be dropped (a unique
    index's constraint can, with the index)."""
    if not create_sql:
        return ()
    names = {c.name: i for i, c in enumerate(desc.columns)}
    out: list[tuple[int, ...]] = []
    for cols, primary in _declared_keys(create_sql):
        if not all(c in names for c in cols):
            continue
        positions = tuple(names[c] for c in cols)
        if primary or not any(desc.columns[i].nullable for i in positions):
            out.append(positions)
    return tuple(out)


def with_declared_keys(plan: RelationExpr, catalog: Catalog, query: exp.Expression) -> RelationExpr:
    """``plan`` (of ``query``) simplified with the declared keys of the tables ``query`` names
    (:func:`spate.plan.keys.simplify_with_keys`); looked up only when the plan has an
    operator a key could make redundant."""
    if not any(isinstance(n, Distinct | Reduce) for n in plan.walk()):
        return plan
    ids = {n.id for n in plan.walk() if isinstance(n, Get)}
    known: dict[GlobalId, tuple[tuple[int, ...], ...]] = {}
    for table in query.find_all(exp.Table):
        db = table.args.get("db")
        name = f"{db.name}.{table.name}" if db is not None and db.name else table.name
        obj = catalog.lookup(name) if name else None
        if obj is None or obj.id not in ids or obj.kind != "table" or obj.desc is None:
            continue
        keys = declared_keys(obj.create_sql, obj.desc)
        if keys:
            known[obj.id] = keys
    return simplify_with_keys(plan, known) if known else plan
