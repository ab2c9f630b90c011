"""Planned statements: plain frozen data the environment executes.

Every statement keeps ``sql``, its own text, for messages and ``SHOW CREATE``. Plans are the IR
(:mod:`spate.plan`); names are catalog names.
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.plan.expr import ScalarExpr
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import RelationExpr
from spate.repr.desc import RelationDesc
from spate.repr.types import Row


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str


# --- data definition -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableKey:
    """A PRIMARY KEY (``primary``) or UNIQUE constraint, named as PostgreSQL names it."""

    name: str
    columns: tuple[str, ...]
    primary: bool = False


@dataclass(frozen=True, slots=True)
class TableCheck:
    """A CHECK constraint: ``expr`` over the table's columns; ``text`` as written."""

    name: str
    expr: ScalarExpr
    text: str


@dataclass(frozen=True, slots=True)
class CreateTable(Statement):
    name: str
    desc: RelationDesc
    if_not_exists: bool = False
    constraints: tuple[TableKey | TableCheck, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateTableAs(Statement):
    """``CREATE TABLE name AS query [WITH [NO] DATA]``: table ``name`` with columns ``desc``,
    filled (``with_data``) with what ``plan`` returns at one timestamp. ``create_sql``: the
    equivalent ``CREATE TABLE name (col type, …)``, kept as its definition."""

    name: str
    desc: RelationDesc
    plan: RelationExpr
    with_data: bool
    create_sql: str
    if_not_exists: bool = False
    """Always ``False``: ``IF NOT EXISTS`` of a table that exists plans as :class:`NoChange`."""


@dataclass(frozen=True, slots=True)
class CreateView(Statement):
    """``CREATE [OR REPLACE] [MATERIALIZED] VIEW``."""

    name: str
    plan: RelationExpr
    materialized: bool = False
    cluster: str | None = None
    replace: bool = False
    if_not_exists: bool = False
    types: tuple[str, ...] = ()
    """The PostgreSQL type of each column (``int4``, ``float4``…), kept with the view."""


@dataclass(frozen=True, slots=True)
class CreateIndex(Statement):
    """``CREATE [DEFAULT] INDEX``; ``name`` is chosen here when the statement gives none."""

    name: str
    on: str
    key: tuple[str, ...]
    cluster: str | None = None
    if_not_exists: bool = False
    unique: bool = False
    """``CREATE UNIQUE INDEX``: also a unique constraint of the table, named as the index."""


@dataclass(frozen=True, slots=True)
class CreateCluster(Statement):
    """``replicas``: the replica names; ``None`` (no REPLICAS clause): one replica, ``r1``."""

    name: str
    replicas: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class CreateClusterReplica(Statement):
    cluster: str
    name: str


@dataclass(frozen=True, slots=True)
class DropClusterReplica(Statement):
    cluster: str
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropCluster(Statement):
    name: str
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class DropObjects(Statement):
    """``DROP <kind> [IF EXISTS] names [CASCADE]``; ``names`` that exist, checked at planning."""

    kind: str
    names: tuple[str, ...]
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class AlterRetainHistory(Statement):
    name: str
    duration_ms: int | None
    """``None``: back to the default (``RESET (RETAIN HISTORY)``)."""


@dataclass(frozen=True, slots=True)
class RenameObject(Statement):
    """``ALTER <kind> name RENAME TO new``."""

    name: str
    new: str


@dataclass(frozen=True, slots=True)
class CommentOn(Statement):
    """``COMMENT ON <kind> name IS 'text'`` (``column``: ``COMMENT ON COLUMN name.column``);
    ``text`` ``None``: ``IS NULL``, the comment removed."""

    name: str
    column: str | None
    text: str | None


@dataclass(frozen=True, slots=True)
class NoChange(Statement):
    """A DDL statement that changes nothing: ``ALTER … OWNER TO`` (spate has one role),
    ``ALTER … IF EXISTS`` of an object that is not there."""


@dataclass(frozen=True, slots=True)
class CreateSecret(Statement):
    name: str
    value: str
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class CreateConnection(Statement):
    """A named PostgreSQL connection; ``url_template`` has ``{password}`` where the secret goes."""

    name: str
    kind: str
    options: tuple[tuple[str, str], ...]
    password_secret: str | None = None


@dataclass(frozen=True, slots=True)
class CreateSource(Statement):
    """``CREATE SOURCE``: ``kind`` is ``load-generator``, ``postgres`` or ``files``."""

    name: str
    kind: str
    options: tuple[tuple[str, str | int | bool], ...]
    connection: str | None = None
    tables: tuple[str, ...] | None = None
    desc: RelationDesc | None = None
    names: tuple[tuple[str, str], ...] = ()
    """Subsource names given upstream tables (``FOR TABLES (db.t AS name)``)."""


@dataclass(frozen=True, slots=True)
class CreateSink(Statement):
    """``CREATE SINK``: ``kind`` is ``postgres`` or ``parquet``."""

    name: str
    from_: str
    kind: str
    options: tuple[tuple[str, str | int | bool], ...]
    connection: str | None = None


# --- data manipulation -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Insert(Statement):
    """Insert ``rows`` (known at planning) or the result of ``plan`` into ``table``."""

    table: str
    rows: tuple[Row, ...] | None
    plan: RelationExpr | None = None


@dataclass(frozen=True, slots=True)
class Delete(Statement):
    """Delete the rows of ``table`` that ``plan`` (a filter of it) returns."""

    table: str
    plan: RelationExpr


@dataclass(frozen=True, slots=True)
class Update(Statement):
    """``plan`` returns each affected row followed by its replacement (``2 × arity`` columns)."""

    table: str
    plan: RelationExpr
    arity: int


# --- reads -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Select(Statement):
    """A one-off read of ``plan``, finished by ``order_by``, ``offset``, ``limit`` and then
    keeping the first ``width`` columns (the others only order), named ``names``."""

    plan: RelationExpr
    names: tuple[str, ...]
    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0
    as_of: int | None = None
    types: tuple[str, ...] = ()
    """The PostgreSQL type (``int4``, ``float4``…) of each of the ``names`` columns."""

    @property
    def width(self) -> int:
        return len(self.names)


@dataclass(frozen=True, slots=True)
class Subscribe(Statement):
    plan: RelationExpr
    names: tuple[str, ...]
    as_of: int | None = None
    up_to: int | None = None
    snapshot: bool = True
    types: tuple[str, ...] = ()
    """The PostgreSQL type of each of the ``names`` columns."""


@dataclass(frozen=True, slots=True)
class Rows(Statement):
    """A result the planner computed from the catalog (SHOW …, EXPLAIN)."""

    names: tuple[str, ...]
    rows: tuple[tuple[str | int | bool | None, ...], ...]
    explained: RelationExpr | None = None
    """For ``EXPLAIN SELECT``: the query, whose read route the environment adds."""


# --- session ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetVariable(Statement):
    """``SET name = value``; ``value = None`` is ``RESET``."""

    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class ShowVariable(Statement):
    name: str


@dataclass(frozen=True, slots=True)
class ShowObjects(Statement):
    """``SHOW TABLES`` …: the environment lists them (it knows clusters and replicas too)."""

    kind: str
    on: str | None = None
