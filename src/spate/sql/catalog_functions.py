"""PostgreSQL's catalog functions and object-identifier casts, written in SQL over the
``pg_catalog`` relations.

Clients' catalog queries call ``format_type``, ``pg_get_indexdef``, ``obj_description``,
``quote_ident``, ``current_setting``… and cast names to ``regclass``. Each is rewritten, in the
parsed statement before it is planned, into an expression spate plans like any other: a CASE,
or a scalar subquery over ``pg_catalog`` (``obj_description(c.oid)`` is ``(SELECT description
FROM pg_catalog.pg_description WHERE objoid = c.oid AND objsubid = 0)``), so the functions
combine with everything else SQL allows and a read that uses them reads the catalog as it is.

The catalog's arrays and the array operations on them are rewritten by
:mod:`spate.sql.catalog_arrays` (called from :func:`rewrite`). Also normalized here:
schema-qualified calls (``pg_catalog.quote_ident(…)``), operators
(``OPERATOR(pg_catalog.~)``) and ``COLLATE pg_catalog.default`` (spate has one collation).

What PostgreSQL does that these do not: a name that names nothing (``'nope'::regclass``) is
NULL, not an error (42P01).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Final, cast

import sqlglot
from sqlglot import exp

from spate.sql.catalog_arrays import (
    ARRAY_OF,
    array_agg,
    array_of_query,
    enclosing_select,
    expand_arrays,
    series_over_array,
    split_array_bound,
    split_array_in_from,
    subscript,
    unnest_in_from,
)
from spate.sql.pg_catalog_data import TYPES
from spate.sql.pg_catalog_oids import relation_oid

_CATALOG_RELATION_OIDS: Final = "(_c.oid < 14500 OR _c.oid >= 20000)"
"""The relations on the search path (``pg_catalog`` and ``public``): see
:mod:`spate.environment.pg_catalog`'s oids."""

_RESERVED: Final = [
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "binary",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "not",
    "notnull",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "primary",
    "references",
    "returning",
    "right",
    "select",
    "session_user",
    "similar",
    "some",
    "symmetric",
    "table",
    "tablesample",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
]

_TYPE_NAMES: Final = {
    "bool": "boolean", "bpchar": "character", "varchar": "character varying",
    "int2": "smallint", "int4": "integer", "int8": "bigint", "float4": "real",
    "float8": "double precision", "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone", "time": "time without time zone",
    "char": '"char"',
}  # fmt: skip
_TYPE_ALIASES: Final = {
    "boolean": "bool", "character": "bpchar", "character varying": "varchar",
    "smallint": "int2", "integer": "int4", "int": "int4", "bigint": "int8", "real": "float4",
    "double precision": "float8", "timestamp without time zone": "timestamp",
    "timestamp with time zone": "timestamptz", "decimal": "numeric", '"char"': "char",
}  # fmt: skip

_MACROS: Final[dict[str, str]] = {
    "quote_ident": (
        "CASE WHEN $1 ~ '^[a-z_][a-z0-9_$]*$' AND $1 NOT IN ({reserved}) THEN CAST($1 AS text) "
        "ELSE '\"' || replace($1, '\"', '\"\"') || '\"' END"
    ),
    "pg_get_expr": "CAST($1 AS text)",
    "pg_get_indexdef/1": (
        "(SELECT _d.definition FROM pg_catalog.spate_definitions AS _d"
        " WHERE _d.oid = $1 AND _d.kind = 'index' AND _d.objsubid = 0)"
    ),
    "pg_get_indexdef/3": (
        "(SELECT _d.definition FROM pg_catalog.spate_definitions AS _d"
        " WHERE _d.oid = $1 AND _d.kind = 'index' AND _d.objsubid = $2)"
    ),
    "pg_get_constraintdef/1": (
        "(SELECT _d.definition FROM pg_catalog.spate_definitions AS _d"
        " WHERE _d.oid = $1 AND _d.kind = 'constraint' AND _d.objsubid = 0)"
    ),
    "pg_get_constraintdef/2": (  # pretty: a CHECK's expression without its outer parentheses
        "(SELECT _d.definition FROM pg_catalog.spate_definitions AS _d"
        " WHERE _d.oid = $1 AND _d.kind = 'constraint'"
        " AND _d.objsubid = CASE WHEN $2 THEN 1 ELSE 0 END)"
    ),
    "pg_get_viewdef": (
        "(SELECT _d.definition FROM pg_catalog.spate_definitions AS _d"
        " WHERE _d.oid = $1 AND _d.kind = 'view')"
    ),
    "obj_description": (
        "(SELECT _d.description FROM pg_catalog.pg_description AS _d"
        " WHERE _d.objoid = $1 AND _d.objsubid = 0)"
    ),
    "col_description": (
        "(SELECT _d.description FROM pg_catalog.pg_description AS _d"
        " WHERE _d.objoid = $1 AND _d.objsubid = $2)"
    ),
    "shobj_description": "CAST(NULL AS text)",
    "pg_table_is_visible": "($1 < 14500 OR $1 >= 20000)",
    "pg_type_is_visible": "CASE WHEN $1 IS NULL THEN NULL ELSE TRUE END",
    "pg_collation_is_visible": "CASE WHEN $1 IS NULL THEN NULL ELSE TRUE END",
    "pg_function_is_visible": "CASE WHEN $1 IS NULL THEN NULL ELSE TRUE END",
    "has_table_privilege": "TRUE",
    "has_schema_privilege": "TRUE",
    "has_database_privilege": "TRUE",
    "has_column_privilege": "TRUE",
    "has_any_column_privilege": "TRUE",
    "has_function_privilege": "TRUE",
    "has_sequence_privilege": "TRUE",
    "pg_has_role": "TRUE",
    "pg_is_in_recovery": "FALSE",
    "pg_relation_is_publishable": "$1 IS NOT NULL",
    # definitions of objects spate never has (statistics objects, triggers, rules, partitions,
    # policies): NULL, as the relations that would list them are empty
    **dict.fromkeys(
        (
            "pg_get_statisticsobjdef_columns",
            "pg_get_statisticsobjdef",
            "pg_get_triggerdef",
            "pg_get_ruledef",
            "pg_get_partkeydef",
            "pg_get_partition_constraintdef",
            "pg_get_function_arguments",
            "pg_get_function_identity_arguments",
            "pg_get_functiondef",
            "pg_get_function_sqlbody",  # spate's functions are built in: no SQL body
            "pg_get_serial_sequence",
        ),
        "CAST(NULL AS text)",
    ),
    # the catalog's arrays are their text form ({a,b}): their elements, separated
    "array_to_string": (
        "regexp_replace(substr(CAST($1 AS text), 2, length(CAST($1 AS text)) - 2), ',', $2, 'g')"
    ),
    # x = ANY(a catalog array column, held as its text form: {a,b}, or an int2vector's 1 2)
    "any_of_array": (
        "CASE WHEN left(CAST($2 AS text), 1) = '{{'"
        " THEN (',' || substr(CAST($2 AS text), 2, length(CAST($2 AS text)) - 2) || ',')"
        " LIKE ('%,' || CAST($1 AS text) || ',%')"
        " ELSE (' ' || CAST($2 AS text) || ' ') LIKE ('% ' || CAST($1 AS text) || ' %') END"
    ),
    # the last subscript of a catalog array held as its text form (an int2vector from 0)
    "array_upper": (
        "CASE WHEN trim(translate(CAST($1 AS text), '{{}},', '   ')) = '' THEN NULL ELSE"
        " length(trim(translate(CAST($1 AS text), '{{}},', '   ')))"
        " - length(replace(trim(translate(CAST($1 AS text), '{{}},', '   ')), ' ', ''))"
        " + CASE WHEN left(CAST($1 AS text), 1) = '{{' THEN 1 ELSE 0 END END"
    ),
    "pg_get_function_result": (
        "(SELECT format_type(_p.prorettype, NULL) FROM pg_catalog.pg_proc AS _p WHERE _p.oid = $1)"
    ),
    "pg_advisory_unlock_all": "CAST('' AS text)",  # spate takes no advisory locks
    "current_setting": (
        "(SELECT _s.setting FROM pg_catalog.pg_settings AS _s WHERE lower(_s.name) = lower($1))"
    ),
    "current_schema": "CAST('public' AS name)",
    "current_schemas": (
        "CASE WHEN $1 THEN CAST('{{pg_catalog,public}}' AS spate_catalog_array_name)"
        " ELSE CAST('{{public}}' AS spate_catalog_array_name) END"
    ),
    "current_database": "(SELECT _d.datname FROM pg_catalog.pg_database AS _d)",
    "current_user": "(SELECT _r.rolname FROM pg_catalog.pg_roles AS _r)",
    "pg_get_userbyid": "(SELECT _r.rolname FROM pg_catalog.pg_roles AS _r WHERE _r.oid = $1)",
    "version": (
        "(SELECT 'PostgreSQL ' || _s.setting || ' (spate) on x86_64-pc-linux-gnu'"
        " FROM pg_catalog.pg_settings AS _s WHERE _s.name = 'server_version')"
    ),
    "pg_encoding_to_char": "CASE WHEN $1 = 6 THEN CAST('UTF8' AS name) ELSE CAST('' AS name) END",
    "format_type": (
        "CASE WHEN $1 IS NULL THEN NULL ELSE COALESCE((SELECT CASE"
        " WHEN $2 IS NULL OR $2 < 0 THEN _v.n"
        " WHEN _v.t = 'varchar' THEN 'character varying(' || CAST($2 - 4 AS text) || ')'"
        " WHEN _v.t = 'bpchar' THEN 'character(' || CAST($2 - 4 AS text) || ')'"
        " WHEN _v.t = 'numeric' THEN 'numeric(' || CAST(($2 - 4) / 65536 AS text) || ','"
        " || CAST(($2 - 4) % 65536 AS text) || ')'"
        " ELSE _v.n END FROM (VALUES {types}) AS _v(o, t, n) WHERE _v.o = $1),"
        " (SELECT CAST(_ty.typname AS text) FROM pg_catalog.pg_type AS _ty WHERE _ty.oid = $1),"
        " '???') END"
    ),
    # a relation's name as text (also built at run time: format('%I.%I', …)::regclass), in
    # its quoted form (public."My T"); pg_catalog's oids are below public's: pg_catalog first
    "to_regclass": (
        "(SELECT min(_c.oid) FROM pg_catalog.pg_class AS _c JOIN pg_catalog.pg_namespace AS _n"
        " ON _n.oid = _c.relnamespace"
        " WHERE quote_ident(_n.nspname) || '.' || quote_ident(_c.relname) = $1"
        " OR (quote_ident(_c.relname) = $1 AND {visible}))"
    ),
    "to_regtype": ("(SELECT _ty.oid FROM pg_catalog.pg_type AS _ty WHERE _ty.typname = $1)"),
    # the display of an object id cast to regclass, regtype, regnamespace
    "regclass_name": (
        "(SELECT CASE WHEN {visible} THEN CAST(_c.relname AS text)"
        " ELSE _n.nspname || '.' || _c.relname END FROM pg_catalog.pg_class AS _c"
        " JOIN pg_catalog.pg_namespace AS _n ON _n.oid = _c.relnamespace WHERE _c.oid = $1)"
    ),
    "regnamespace_name": (
        "(SELECT CAST(_n.nspname AS text) FROM pg_catalog.pg_namespace AS _n WHERE _n.oid = $1)"
    ),
    "regclass_of": (
        "(SELECT _c.oid FROM pg_catalog.pg_class AS _c JOIN pg_catalog.pg_namespace AS _n"
        " ON _n.oid = _c.relnamespace WHERE _c.relname = $2 AND _n.nspname = $1)"
    ),
    "regclass_search": (  # pg_catalog's oids are below public's: pg_catalog first
        "(SELECT min(_c.oid) FROM pg_catalog.pg_class AS _c WHERE _c.relname = $1 AND {visible})"
    ),
    "regnamespace_of": "(SELECT _n.oid FROM pg_catalog.pg_namespace AS _n WHERE _n.nspname = $1)",
    "regproc_of": "(SELECT min(_p.oid) FROM pg_catalog.pg_proc AS _p WHERE _p.proname = $1)",
    "regtype_of": "(SELECT _ty.oid FROM pg_catalog.pg_type AS _ty WHERE _ty.typname = $1)",
}
"""Each function as SQL over its arguments ``$1``, ``$2``…; ``name/n`` is the form with n
arguments."""
_ALIASES: Final = {
    "currentschema": "current_schema",
    "currentschemas": "current_schemas",
    "currentdatabase": "current_database",
    "currentcatalog": "current_database",
    "currentuser": "current_user",
    "sessionuser": "current_user",
    "currentversion": "version",
    "arraytostring": "array_to_string",  # sqlglot's node for it: its arguments this, expression
}
_OID_TYPES: Final = ("regclass", "regtype", "regproc", "regprocedure", "regnamespace", "oid")


def rewrite(tree: exp.Expression) -> exp.Expression:
    """``tree`` with every catalog function and object-identifier cast written as SQL
    (module docs). Leaves every other node as it is."""
    if not _mentions_catalog(tree):
        return tree
    tree = _ordered_by_subquery(tree)
    tree = tree.transform(split_array_bound, copy=False)
    for select in list(tree.find_all(exp.Select)):
        split_array_in_from(select)
        expand_arrays(select)
        series_over_array(select)
        unnest_in_from(select)
    _qualify_arguments(tree)
    _name_oid_casts(tree)
    # casts first: a function's arguments are copied into its SQL as they are then
    tree = _post_order(tree, _rewrite_cast)
    return tree.transform(_rewrite_node, copy=False)


def _name_oid_casts(tree: exp.Expression) -> None:
    """Each result column that is a cast to an object-identifier type (or a cast of one),
    aliased as PostgreSQL names it before it is rewritten into a CASE or a subquery: after
    what it casts when that is a column or a function call (``c.oid::regclass`` is ``oid``),
    else after the outermost cast's type (``'t'::regclass`` is ``regclass``)."""
    for select in list(tree.find_all(exp.Select)):
        for item in list(select.expressions):
            name = _oid_cast_name(item)
            if name is not None:
                item.replace(exp.Alias(this=item.copy(), alias=exp.to_identifier(name)))


def _oid_cast_name(item: exp.Expression) -> str | None:
    n = item
    while isinstance(n, exp.Paren):
        n = n.this
    if not isinstance(n, (exp.Cast, exp.TryCast)):
        return None
    outermost = _cast_target(n)
    oid_cast = False
    while isinstance(n, (exp.Cast, exp.TryCast, exp.Paren)):
        if not isinstance(n, exp.Paren):
            oid_cast = oid_cast or _cast_target(n) is not None
        n = n.this
    if not oid_cast:
        return None
    if isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier):
        return n.name
    if isinstance(n, exp.Anonymous):
        return n.name.lower()
    if outermost is None:
        return None  # named after its type as it is (pg_catalog.text is text)
    return outermost.strip('"')


def _post_order(
    tree: exp.Expression, fn: Callable[[exp.Expression], exp.Expression]
) -> exp.Expression:
    """``tree`` with ``fn`` applied to every node, children before their parent (a replaced
    node's parts are rewritten already)."""
    for node in reversed(list(tree.walk())):
        assert isinstance(node, exp.Expression)
        new = fn(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def _bitwise_and(node: exp.BitwiseAnd) -> exp.Expression:
    """``a & 2^k`` (a flag of ``indoption``): ``(a / 2^k) % 2 * 2^k``."""
    bit = node.expression
    while isinstance(bit, (exp.Cast, exp.Paren)):
        bit = bit.this
    if not isinstance(bit, exp.Literal) or bit.is_string:
        return node
    value = int(str(bit.this))
    if value <= 0 or value & (value - 1):
        return node
    a = node.this.sql(dialect="postgres")
    return cast(exp.Expression, sqlglot.parse_one(f"(({a}) / {value}) % 2 * {value}"))


def _escape(node: exp.Escape) -> exp.Expression:
    """``LIKE p ESCAPE 'c'`` (SQLAlchemy escapes with ``/``) as ``LIKE p'``, ``p`` with ``c``
    written as spate's one escape character, the backslash."""
    like, char = node.this, node.expression
    if (
        not isinstance(like, (exp.Like, exp.ILike))
        or not isinstance(char, exp.Literal)
        or not char.is_string
        or len(str(char.this)) != 1
        or str(char.this) == "\\"
    ):
        return node
    c = str(char.this).replace("'", "''")
    pattern = like.expression.sql(dialect="postgres")
    sql = f"replace(replace({pattern}, '\\', '\\\\'), '{c}', '\\')"
    like.set("expression", sqlglot.parse_one(sql, read="postgres"))
    return cast(exp.Expression, like)


def _bare_char(node: exp.Expression) -> bool:
    """A cast to ``char`` without a length (``'f'::char``: char(1) in PostgreSQL), which
    clients compare with a catalog's ``"char"`` column (``contype = 'f'::char``). Rewritten
    only in a query that reads the catalog: elsewhere char(n) is refused (0A000), as its
    blank-padded comparisons are not text's."""
    to = node.args.get("to") if isinstance(node, exp.Cast) else None
    return isinstance(to, exp.DataType) and to.this == exp.DataType.Type.CHAR and not to.expressions


def _rewrite_cast(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Escape):
        return _escape(node)
    if _bare_char(node):  # its first character, as text (a "char" column is text here)
        text = exp.Cast(this=node.this, to=exp.DataType.build("text"))
        return exp.Left(this=text, expression=exp.Literal.number(1))
    if isinstance(node, exp.ArrayAgg):
        out = array_agg(node)
        return node if out is node else _named(node, out, "array_agg")
    if isinstance(node, exp.Bracket):
        return subscript(node)
    if isinstance(node, exp.BitwiseAnd):
        return _bitwise_and(node)
    if (
        isinstance(node, exp.Array)
        and node.expressions
        and isinstance(node.expressions[0], exp.Select)
    ):
        return array_of_query(node)
    if isinstance(node, exp.ByteString):  # E'…': its escapes already read
        return exp.Literal.string(str(node.this))
    if isinstance(node, exp.EQ) and isinstance(node.expression, exp.Any):
        array = node.expression.this
        while isinstance(array, exp.Paren):
            array = array.this
        if isinstance(array, (exp.Column, exp.Dot)):
            return _expand("any_of_array", [node.this, array])
        if isinstance(array, exp.Array) and not any(
            isinstance(e, exp.Select) for e in array.expressions
        ):  # x = ANY(ARRAY[a, b]): x IN (a, b)
            return exp.In(this=node.this, expressions=list(array.expressions))
    if isinstance(node, (exp.Cast, exp.TryCast)):
        target = _cast_target(node)
        if target is not None:
            return _cast(node, target)
        unqualified = _unqualified_type(node.args.get("to"))
        if unqualified is not None:
            node.set("to", unqualified)
    return node


def _unqualified_type(to: object) -> exp.DataType | None:
    """``pg_catalog.text`` → ``text`` (the types are all in ``pg_catalog``)."""
    if (
        isinstance(to, exp.DataType)
        and to.this == exp.DataType.Type.ARRAY
        and len(to.expressions) == 1
    ):
        element = _unqualified_type(to.expressions[0])
        name = ARRAY_OF.get(element.this) if element is not None else None
        if name is None:
            return None
        return exp.DataType.build(name, dialect="postgres", udt=True)
    if not isinstance(to, exp.DataType) or to.this != exp.DataType.Type.USERDEFINED:
        return None
    kind = to.args.get("kind")
    if not isinstance(kind, exp.Dot) or not isinstance(kind.this, exp.Identifier):
        return None
    if kind.this.name.lower() != "pg_catalog" or not isinstance(kind.expression, exp.Identifier):
        return None
    try:
        return exp.DataType.build(kind.expression.name, dialect="postgres")
    except Exception:  # a type sqlglot does not know: the planner names it
        return None


def _ordered_by_subquery(tree: exp.Expression) -> exp.Expression:
    """A query ordered by an expression holding a subquery (Grafana lists the tables on the
    search path first: ``ORDER BY CASE WHEN schema IN (SELECT …) THEN 0 ELSE 1 END, 1``): the
    query with those expressions as extra columns, read by an outer query ordered by them,
    which returns the original columns. Only where every column has a name of its own."""
    if not isinstance(tree, exp.Select):
        return tree
    order = tree.args.get("order")
    if not isinstance(order, exp.Order) or not any(
        o.find(exp.Subquery, exp.Select) for o in order.expressions
    ):
        return tree
    names = [e.alias_or_name for e in tree.expressions]
    if (
        not names
        or not all(names)
        or len(set(names)) != len(names)
        or any(isinstance(e, exp.Star) or e.find(exp.Star) for e in tree.expressions)
        or tree.args.get("distinct")
    ):
        return tree
    keys: list[exp.Ordered] = []
    for n, ordered in enumerate(order.expressions):
        value = ordered.this
        if isinstance(value, exp.Literal) and not value.is_string:
            position = int(str(value.this))
            if not 1 <= position <= len(names):
                return tree
            key: exp.Expression = exp.column(names[position - 1], quoted=True)
        else:
            hidden = f"_ord{n}"
            tree.select(exp.alias_(value.copy(), hidden), copy=False)
            key = exp.column(hidden)
        keys.append(exp.Ordered(this=key, desc=ordered.args.get("desc")))
    limit, offset = tree.args.get("limit"), tree.args.get("offset")
    for arg in ("order", "limit", "offset"):
        tree.set(arg, None)
    outer = exp.select(*[exp.column(n, quoted=True) for n in names]).from_(
        exp.Subquery(this=tree, alias=exp.TableAlias(this=exp.to_identifier("_ordered")))
    )
    outer.set("order", exp.Order(expressions=keys))
    outer.set("limit", limit)
    outer.set("offset", offset)
    return outer


def _qualify_arguments(tree: exp.Expression) -> None:
    """Qualify the unqualified columns in the arguments of the functions and casts written as
    subqueries here, when their query reads one relation: ``oid::regtype`` in ``FROM pg_type t``
    means ``t.oid``, not the ``oid`` of the relation the subquery reads."""
    for node in list(tree.walk()):
        assert isinstance(node, exp.Expression)
        called = _function_name(node)
        is_call = called is not None and called in _MACROS
        if not is_call and not (isinstance(node, (exp.Cast, exp.TryCast)) and _cast_target(node)):
            continue
        select = node.parent
        while select is not None and not isinstance(select, exp.Select):
            select = select.parent
        if select is None or select.args.get("joins"):
            continue
        source = select.args.get("from_") or select.args.get("from")
        relation = source.this if isinstance(source, exp.From) else None
        name = relation.alias_or_name if isinstance(relation, exp.Table) else None
        if not name:
            continue
        for column in node.find_all(exp.Column):
            if not column.table and enclosing_select(column) is select:
                column.set("table", exp.to_identifier(name))


def _mentions_catalog(tree: exp.Expression) -> bool:
    for node in tree.walk():
        if isinstance(node, (exp.Anonymous, exp.Operator, exp.Collate, exp.Dot, exp.ByteString)):
            return True
        if isinstance(
            node,
            (
                exp.Any,
                exp.Array,
                exp.Bracket,
                exp.BitwiseAnd,
                exp.Explode,
                exp.ArrayAgg,
                exp.Escape,
                exp.Format,
            ),
        ):
            return True
        if isinstance(node, exp.Func) and type(node).__name__.lower() in _ALIASES:
            return True
        if isinstance(node, (exp.Cast, exp.TryCast)) and (
            _cast_target(node) is not None or _unqualified_type(node.args.get("to")) is not None
        ):
            return True
    return False


def _rewrite_node(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        schema = node.this
        if isinstance(schema, exp.Identifier) and schema.name.lower() == "pg_catalog":
            inner = cast(exp.Expression, node.expression)
            return _rewrite_node(inner)
    if isinstance(node, exp.Operator):
        return _operator(node)
    if isinstance(node, exp.Collate):
        collated: exp.Expression = node.this
        return collated
    if isinstance(node, exp.Format):
        formatted = _format(node)
        return node if formatted is node else _named(node, formatted, "format")
    name = _function_name(node)
    if name is None:
        return node
    if name == "json_build_object" and isinstance(node, exp.Anonymous):
        return _named(node, _json_object(list(node.expressions)), name)
    args = [a for a in node.args.get("expressions") or ()] if isinstance(node, exp.Anonymous) else [
        a for a in (node.args.get("this"), node.args.get("expression"))
        if isinstance(a, exp.Expression)
    ]  # fmt: skip
    key = f"{name}/{len(args)}"
    if key not in _MACROS and name not in _MACROS:
        return node
    out = _expand(key if key in _MACROS else name, args)
    return _named(node, out, name)


def _json_object(args: list[exp.Expression]) -> exp.Expression:
    """``json_build_object(k1, v1, …)`` as its JSON text: each value as a JSON string (or
    null). spate builds no JSON values in SQL; the catalog queries that ask for one
    (SQLAlchemy's reflection of identity and collation options) build objects of names."""
    parts = []
    args = [a.copy().transform(_rewrite_node, copy=False) for a in args]
    for i in range(0, len(args) - 1, 2):
        key = args[i].sql(dialect="postgres")
        value = args[i + 1].sql(dialect="postgres")
        quoted = "replace(replace(CAST({} AS text), '\\', '\\\\'), '\"', '\\\"')"
        parts.append(
            f"'\"' || {quoted.format(key)} || '\": ' || COALESCE('\"' || "
            f"{quoted.format(value)} || '\"', 'null')"
        )
    body = " || ', ' || ".join(parts) if parts else "''"
    sql = f"'{{' || {body} || '}}'"
    return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))


_SPECIFIER: Final = re.compile(r"%([%sIL])")


def _format(node: exp.Format) -> exp.Expression:
    """``format('…%s…%I…%L…', args…)`` with a constant format string, as the concatenation
    it makes (clients build qualified names with it: Metabase's field sync): ``%s`` the
    argument as text (NULL: empty), ``%I`` quoted as an identifier, ``%L`` as a literal (NULL:
    ``NULL``), ``%%`` a percent sign. Any other format is left as it is (and refused)."""
    fmt = node.this
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        return node
    args = [a.sql(dialect="postgres") for a in node.expressions]
    parts: list[str] = []
    at, used = 0, 0
    text = str(fmt.this)
    for m in _SPECIFIER.finditer(text):
        if "%" in text[at : m.start()]:
            return node  # a specifier spate does not take (%1$s, widths…)
        parts.append(_quoted_literal(text[at : m.start()]))
        at = m.end()
        kind = m.group(1)
        if kind == "%":
            parts.append(_quoted_literal("%"))
            continue
        if used >= len(args):
            return node  # too few arguments: refused as an unknown call
        arg = f"CAST(({args[used]}) AS text)"
        used += 1
        if kind == "s":
            parts.append(f"COALESCE({arg}, '')")
        elif kind == "I":
            parts.append(f"quote_ident({arg})")
        else:
            quote = _quoted_literal("'")
            doubled = _quoted_literal("''")
            parts.append(
                f"CASE WHEN {arg} IS NULL THEN 'NULL'"
                f" ELSE {quote} || replace({arg}, {quote}, {doubled}) || {quote} END"
            )
    if "%" in text[at:]:
        return node
    parts.append(_quoted_literal(text[at:]))
    sql = " || ".join(p for p in parts if p != "''") or "''"
    out = sqlglot.parse_one(f"CAST(({sql}) AS text)", read="postgres")
    return out.transform(_rewrite_node, copy=False)  # its quote_ident


def _quoted_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _function_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return _ALIASES.get(type(node).__name__.lower())
    return None


def _named(original: exp.Expression, out: exp.Expression, name: str) -> exp.Expression:
    """``out`` keeps the column name PostgreSQL gives the call it replaces."""
    parent = original.parent
    if isinstance(parent, exp.Dot):  # pg_catalog.f(…)
        original, parent = parent, parent.parent
    if isinstance(parent, exp.Select) and original.arg_key == "expressions":
        return exp.Alias(this=out, alias=exp.to_identifier(name))
    return out


def _expand(key: str, args: list[exp.Expression]) -> exp.Expression:
    body = _parsed(key).copy()
    args = [a.copy().transform(_rewrite_node, copy=False) for a in args]

    def put(n: exp.Expression) -> exp.Expression:
        if isinstance(n, (exp.Parameter, exp.Placeholder)):
            index = _index(n)
            if index is not None:
                return args[index].copy() if index < len(args) else exp.null()
        return n

    return body.transform(put, copy=False)


def _index(n: exp.Expression) -> int | None:
    text = n.sql(dialect="postgres")
    if text.startswith("$") and text[1:].isdigit():
        return int(text[1:]) - 1
    return None


@functools.cache
def _parsed(key: str) -> exp.Expression:
    text = _MACROS[key].format(
        reserved=", ".join(f"'{w}'" for w in _RESERVED),
        visible=_CATALOG_RELATION_OIDS,
        types=", ".join(f"({o}, '{t}', '{d}')" for o, t, d in _type_display()),
    )
    select = rewrite(cast(exp.Expression, sqlglot.parse_one(f"SELECT {text}", read="postgres")))
    assert isinstance(select, exp.Select)
    first: exp.Expression = select.expressions[0]
    return first


def _type_display() -> list[tuple[int, str, str]]:
    """``(oid, typname, what format_type shows)`` of every type spate has."""
    rows = [(int(r[0]), str(r[1]), int(r[13])) for r in TYPES]  # type: ignore[call-overload]
    names = {oid: name for oid, name, _ in rows}

    def display(name: str) -> str:
        return _TYPE_NAMES.get(name, name).replace("'", "''")

    out = []
    for oid, name, elem in rows:
        if name.startswith("_") and elem in names:
            out.append((oid, name, display(names[elem]) + "[]"))
        else:
            out.append((oid, name, display(name)))
    return out


_OPERATORS: Final[dict[str, Callable[[exp.Expression, exp.Expression], exp.Expression]]] = {
    "~": lambda a, b: exp.RegexpLike(this=a, expression=b),
    "!~": lambda a, b: exp.Not(this=exp.RegexpLike(this=a, expression=b)),
    "~*": lambda a, b: exp.RegexpILike(this=a, expression=b),
    "!~*": lambda a, b: exp.Not(this=exp.RegexpILike(this=a, expression=b)),
    "=": lambda a, b: exp.EQ(this=a, expression=b),
    "<>": lambda a, b: exp.NEQ(this=a, expression=b),
    "<": lambda a, b: exp.LT(this=a, expression=b),
    ">": lambda a, b: exp.GT(this=a, expression=b),
    "<=": lambda a, b: exp.LTE(this=a, expression=b),
    ">=": lambda a, b: exp.GTE(this=a, expression=b),
    "~~": lambda a, b: exp.Like(this=a, expression=b),
    "~~*": lambda a, b: exp.ILike(this=a, expression=b),
    "||": lambda a, b: exp.DPipe(this=a, expression=b),
}


def _operator(node: exp.Operator) -> exp.Expression:
    op = str(node.args.get("operator") or "").split(".")[-1].strip()
    make = _OPERATORS.get(op)
    if make is None:
        return node
    right = node.expression
    if isinstance(right, exp.Collate):
        right = right.this
    return make(node.this, right)


def _cast_target(node: exp.Cast | exp.TryCast | exp.Expression) -> str | None:
    """``regclass``, ``regtype``, ``oid``… when ``node`` casts to an object-identifier type
    (or ``"char"``)."""
    to = node.args.get("to")
    if isinstance(to, exp.ObjectIdentifier):
        name = str(to.this).lower()
        return name if name in _OID_TYPES else None
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.USERDEFINED:
        kind = to.args.get("kind")
        if isinstance(kind, exp.Dot):
            kind = kind.expression
        if isinstance(kind, exp.Identifier):
            name = str(kind.this).lower()
            if name in _OID_TYPES:
                return name
            if name == "char" and kind.quoted:
                return '"char"'
    return None


def _cast(node: exp.Expression, target: str) -> exp.Expression:
    value = node.this
    if target == '"char"':
        return exp.Cast(this=value, to=exp.DataType.build("text"))
    if target == "oid":  # an object id of type oid (what it casts, as a number)
        number = exp.Cast(this=value, to=exp.DataType.build("bigint"))
        return exp.Cast(this=number, to=exp.DataType.build("oid", dialect="postgres", udt=True))
    literal = value.this if isinstance(value, exp.Literal) and value.is_string else None
    oid = _literal_oid(str(literal), target) if literal is not None else value
    if literal is None and target == "regclass" and _text_valued(value):
        oid = _expand("to_regclass", [value])
    if not _displayed(node):
        return oid  # an object id: compared, joined, passed to a function
    if target == "regclass":
        shown = _expand("regclass_name", [oid])
    elif target == "regtype":
        shown = _expand("format_type", [oid, exp.null()])
    elif target == "regnamespace":
        shown = _expand("regnamespace_name", [oid])
    else:
        return oid
    # the invalid object id 0 is shown as '-', as PostgreSQL shows it
    zero = exp.EQ(this=oid.copy(), expression=exp.Literal.number(0))
    case = exp.Case(ifs=[exp.If(this=zero, true=exp.Literal.string("-"))], default=shown)
    if target in ("regclass", "regtype") and _result_column(node):
        # a result column of the type PostgreSQL gives it (its name as the value: the text
        # format; spate.pgwire.types refuses the binary one, which is the object id)
        return exp.Cast(this=case, to=exp.DataType.build(target, dialect="postgres", udt=True))
    return case


def _text_valued(node: exp.Expression) -> bool:
    """Whether ``node`` is text by its form (a name built at run time), not an object id."""
    if isinstance(node, (exp.Format, exp.DPipe, exp.Concat, exp.ConcatWs)):
        return True
    if isinstance(node, exp.Cast):
        to = node.args.get("to")
        return isinstance(to, exp.DataType) and to.is_type("text", "varchar", "name")
    return False


def _result_column(node: exp.Expression) -> bool:
    """Whether ``node`` is a result column of its SELECT (in parentheses or aliased)."""
    child: exp.Expression = node
    while isinstance(child.parent, (exp.Paren, exp.Alias)):
        child = child.parent
    return isinstance(child.parent, exp.Select) and child.arg_key == "expressions"


def _displayed(node: exp.Expression) -> bool:
    """Whether ``node`` (a cast to an object-identifier type) is shown as text: a result
    column, concatenated or cast to text (PostgreSQL prints a ``regclass`` as its name). In
    an ORDER BY key it stays the id: spate orders by no subquery (psql's ``\\d`` orders a
    table's partitions, which spate never has, by ``oid::regclass::text``)."""
    above = node.parent
    while above is not None and not isinstance(above, exp.Select):
        if isinstance(above, exp.Ordered):
            return False
        above = above.parent
    parent = node.parent
    while isinstance(parent, (exp.Paren, exp.Alias)):
        parent = parent.parent
    if isinstance(parent, exp.Select):
        return node.arg_key == "expressions" or (
            isinstance(node.parent, exp.Alias) and node.parent.arg_key == "expressions"
        )
    if isinstance(parent, exp.DPipe):
        return True
    if not isinstance(parent, exp.Cast) or _cast_target(parent) is not None:
        return False
    to = _unqualified_type(parent.to) or parent.to  # psql casts to pg_catalog.text
    return to.this in (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR)


def _literal_oid(text: str, target: str) -> exp.Expression:
    """The oid a name cast to ``target`` names (NULL if none)."""
    parts = _split_name(text)
    if target == "regclass":
        qualified = ".".join(parts) if len(parts) > 1 else f"pg_catalog.{parts[0]}"
        fixed = relation_oid(qualified)
        if fixed is not None:  # pg_catalog first, as on every search path
            return exp.Literal.number(fixed)
        if len(parts) > 1:
            return _expand(
                "regclass_of", [exp.Literal.string(parts[0]), exp.Literal.string(parts[-1])]
            )
        return _expand("regclass_search", [exp.Literal.string(parts[-1])])
    if target == "regtype":
        name = " ".join(text.lower().split())
        name = _TYPE_ALIASES.get(name, name)
        if name.endswith("[]"):
            name = "_" + _TYPE_ALIASES.get(name[:-2].strip(), name[:-2].strip())
        return _expand("regtype_of", [exp.Literal.string(name.split("(")[0].strip())])
    if target == "regnamespace":
        return _expand("regnamespace_of", [exp.Literal.string(parts[-1])])
    return _expand("regproc_of", [exp.Literal.string(parts[-1].split("(")[0])])


def _split_name(text: str) -> list[str]:
    """``public."My T"`` → ``['public', 'My T']``; unquoted parts fold to lower case."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            j, part = i + 1, []
            while j < n:
                if text[j] == '"':
                    if j + 1 < n and text[j + 1] == '"':
                        part.append('"')
                        j += 2
                        continue
                    break
                part.append(text[j])
                j += 1
            out.append("".join(part))
            i = j + 1
        else:
            j = text.find(".", i)
            j = n if j < 0 else j
            out.append(text[i:j].strip().lower())
            i = j
        if i < n and text[i] == ".":
            i += 1
    return out
