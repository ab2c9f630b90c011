"""The catalog's arrays, held as their PostgreSQL text form, and the array operations clients
apply to them, rewritten for that form in a parsed catalog query before it is planned.

``pg_index.indkey`` is ``1 2`` (an ``int2vector``, counted from 0), ``pg_class.reloptions`` or
``pg_proc.proargtypes`` arrays are ``{a,b}`` (counted from 1): spate has no array values, so
``a[i]``, ``ARRAY(SELECT …)``, ``array_agg``, set-returning calls over an array in a select list
(``unnest``, ``generate_subscripts``, ``_pg_expandarray``) or as a FROM item (``unnest(a) x``,
``generate_series`` up to ``array_upper``, ``string_to_array(t, sep) s``) become text
operations and joins with the positions 0…32 (an index has at most 32 keys). Used by
:mod:`spate.sql.catalog_functions`, which rewrites the catalog functions themselves.
"""

from __future__ import annotations

from typing import Final, cast

import sqlglot
from sqlglot import exp

from spate.sql.pg_catalog_data import COLUMNS
from spate.sql.types import ARRAY_PREFIX


def array_of_query(node: exp.Array) -> exp.Expression:
    """``ARRAY(SELECT x FROM … WHERE …)`` as the text form of the array (``{a,b}``): the
    query with ``x`` aggregated (the catalog's arrays are held as their text form)."""
    query = node.expressions[0] if len(node.expressions) == 1 else None
    if (
        not isinstance(query, exp.Select)
        or len(query.expressions) != 1
        or any(query.args.get(k) for k in ("group", "having", "limit", "offset", "distinct"))
    ):
        return node
    order = query.args.get("order")
    value = query.expressions[0]
    if isinstance(value, exp.Alias):
        value = value.this
    element = exp.Cast(this=value.copy(), to=exp.DataType.build("text"))
    if order is not None:  # the elements in the aggregate's order (spate's: by value)
        query.set("order", None)
    agg = exp.Anonymous(this="string_agg", expressions=[element, exp.Literal.string(",")])
    joined = exp.DPipe(
        this=exp.DPipe(
            this=exp.Literal.string("{"),
            expression=exp.Coalesce(this=agg, expressions=[exp.Literal.string("")]),
        ),
        expression=exp.Literal.string("}"),
    )
    query.set("expressions", [joined])
    return exp.Subquery(this=query)


def subscript(node: exp.Bracket) -> exp.Expression:
    """``a[i]`` of a catalog array held as its text form: an ``int2vector`` (``1 2``) counts
    from 0, an array (``{1,2}``) from 1."""
    if len(node.expressions) != 1:
        return node
    text = f"CAST({node.this.sql(dialect='postgres')} AS text)"
    words = f"trim(translate({text}, '{{}},', '   '))"
    index = node.expressions[0].sql(dialect="postgres")
    sql = (
        f"CAST(NULLIF(split_part({words}, ' ', CAST(({index}) + CASE WHEN left({text}, 1) = '{{'"
        f" THEN 0 ELSE 1 END AS integer)), '') AS integer)"
    )
    return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))


ARRAY_OF: Final = {
    exp.DataType.Type.TEXT: f"{ARRAY_PREFIX}text",
    exp.DataType.Type.VARCHAR: f"{ARRAY_PREFIX}text",
    exp.DataType.Type.BIGINT: f"{ARRAY_PREFIX}int8",
    exp.DataType.Type.INT: f"{ARRAY_PREFIX}int4",
    exp.DataType.Type.SMALLINT: f"{ARRAY_PREFIX}int2",
}


def _catalog_column_arrays() -> dict[str, str]:
    """The array type of each catalog column name that has one type wherever it occurs."""
    kinds: dict[str, set[str]] = {}
    for columns in COLUMNS.values():
        for name, type_name in columns:
            kinds.setdefault(name, set()).add(type_name)
    text = {"name", "text", "varchar", "char"}
    out = {}
    for name, types in kinds.items():
        if types <= text:
            out[name] = f"{ARRAY_PREFIX}text"
        elif types == {"bool"}:
            out[name] = f"{ARRAY_PREFIX}bool"
    return out


_PREDICATES: Final = (
    exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Not, exp.And, exp.Or, exp.Is,
    exp.Boolean,
)  # fmt: skip


def _element_type(value: exp.Expression) -> str | None:
    """The array type ``array_agg(value)`` makes, where the expression says it: a cast's
    type, ``boolean[]`` for a comparison, a CASE's branches' (``None``: not known here).
    spate names these types with :data:`ARRAY_PREFIX`."""
    while isinstance(value, exp.Paren):
        value = value.this
    if isinstance(value, exp.Cast) and isinstance(value.to, exp.DataType):
        return ARRAY_OF.get(value.to.this)
    if isinstance(value, _PREDICATES):
        return f"{ARRAY_PREFIX}bool"
    if isinstance(value, exp.Column):  # a catalog column: its type where its name says it
        return _CATALOG_COLUMN_ARRAYS.get(value.name)
    if isinstance(value, exp.Case):
        branches = [i.args.get("true") for i in value.args.get("ifs") or ()]
        branches.append(value.args.get("default"))
        types = {
            f"{ARRAY_PREFIX}text" if isinstance(b, (exp.Anonymous, exp.Dot)) else _element_type(b)
            for b in branches
            if isinstance(b, exp.Expression)
        }
        return types.pop() if len(types) == 1 else None
    return None


def _defining(value: exp.Expression, at: exp.Expression) -> exp.Expression:
    """The expression a column of a derived table stands for (``idx_attr.element`` in
    ``FROM (SELECT CASE … END AS element …) AS idx_attr``), else ``value``."""
    if not isinstance(value, exp.Column) or not value.table:
        return value
    select = enclosing_select(at)
    if select is None:
        return value
    sources: list[exp.Expression] = []
    source = select.args.get("from_") or select.args.get("from")
    if isinstance(source, exp.From):
        sources.append(source.this)
    sources += [j.this for j in select.args.get("joins") or ()]
    for s in sources:
        if isinstance(s, exp.Subquery) and s.alias_or_name == value.table:
            query = s.this
            if isinstance(query, exp.Select):
                for e in query.expressions:
                    if e.alias_or_name == value.name:
                        return cast(exp.Expression, e.this if isinstance(e, exp.Alias) else e)
    return value


_CATALOG_COLUMN_ARRAYS: Final = _catalog_column_arrays()


def array_agg(node: exp.ArrayAgg) -> exp.Expression:
    """``array_agg(x [ORDER BY k])`` as the text form of the array (``{a,"b c"}``, ``{t,f}``),
    typed as the array of ``x``'s type where the expression says it (a cast, a comparison);
    otherwise left as it is (and refused): the catalog's arrays are their text form."""
    inner = node.this
    order: list[exp.Expression] = []
    if isinstance(inner, exp.Order):
        order = list(inner.expressions)
        inner = inner.this
    array_type = _element_type(_defining(inner, node))
    if array_type is None:
        return node
    value = f"CAST({inner.sql(dialect='postgres')} AS text)"
    if array_type == f"{ARRAY_PREFIX}bool":
        b = inner.sql(dialect="postgres")
        value = f"CASE WHEN {b} THEN 't' WHEN NOT ({b}) THEN 'f' END"
    element = (
        f"CASE WHEN {value} IS NULL THEN 'NULL' WHEN {value} ~ '^[A-Za-z0-9_]+$' THEN {value}"
        f" ELSE '\"' || replace(replace({value}, '\\', '\\\\'), '\"', '\\\"') || '\"' END"
    )
    by = f" ORDER BY {', '.join(o.sql(dialect='postgres') for o in order)}" if order else ""
    sql = f"CAST('{{' || COALESCE(string_agg({element}, ','{by}), '') || '}}' AS {array_type})"
    return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))


_MAX_ELEMENTS: Final = 32
"""The most elements an expanded catalog array has (an index's keys: PostgreSQL's 32)."""


def _expandarray_call(node: exp.Expression) -> exp.Anonymous | None:
    """The ``_pg_expandarray(a)`` call ``node`` is (``information_schema.`` or not)."""
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous):
        node = node.expression
    if isinstance(node, exp.Anonymous) and str(node.name).lower() == "_pg_expandarray":
        return node
    return None


def _set_returning(node: exp.Expression) -> tuple[str, exp.Expression] | None:
    """``(kind, array)`` of a set-returning call over a catalog array in a select list:
    ``_pg_expandarray(a)`` (``expand``), ``unnest(a)`` (``unnest``), ``generate_subscripts(a,
    1)`` (``subscripts``)."""
    call = _expandarray_call(node)
    if call is not None and call.expressions:
        return "expand", call.expressions[0]
    if isinstance(node, exp.Explode) and isinstance(node.this, exp.Expression):
        return "unnest", node.this
    if (
        isinstance(node, exp.Anonymous)
        and str(node.name).lower() == "generate_subscripts"
        and node.expressions
    ):
        return "subscripts", node.expressions[0]
    return None


def expand_arrays(select: exp.Select) -> None:
    """Set-returning calls over catalog arrays in a select list (pgjdbc's getPrimaryKeys and
    getIndexInfo use ``information_schema._pg_expandarray(a)``, SQLAlchemy ``unnest(a)`` and
    ``generate_subscripts(a, 1)``): a row per element, the calls in lockstep, as PostgreSQL's
    set-returning functions in a select list give. ``(…).n`` of ``_pg_expandarray`` is the
    element's position and the call itself (and ``(keys).x`` of it, outside) its value. The
    catalog's arrays are their text form (``1 2``, ``{1,2}``): the query is joined with the
    positions 1…32 up to the first array's length."""
    calls = [
        found
        for node in select.expressions
        for found in [_set_returning(n) for n in node.walk(prune=_nested_query)]
        if found is not None
    ]
    if not calls:
        return

    def words(array: exp.Expression) -> str:
        text = f"CAST({array.sql(dialect='postgres')} AS text)"
        return f"trim(translate({text}, '{{}},', '   '))"

    first = words(calls[0][1])
    count = (
        f"CASE WHEN {first} = '' THEN 0 ELSE length({first}) - "
        f"length(replace({first}, ' ', '')) + 1 END"
    )

    def element(array: exp.Expression) -> exp.Expression:
        sql = f"CAST(split_part({words(array)}, ' ', _ea.n) AS integer)"
        return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))

    def subscript(array: exp.Expression) -> exp.Expression:
        text = f"CAST({array.sql(dialect='postgres')} AS text)"  # an int2vector counts from 0
        sql = f"_ea.n - CASE WHEN left({text}, 1) = '{{' THEN 0 ELSE 1 END"
        return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))

    position = cast(exp.Expression, exp.column("n", table="_ea"))

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Dot) and isinstance(n.this, exp.Paren):
            inner = _expandarray_call(n.this.this)
            if inner is not None:
                field = n.expression.name.lower()
                return position.copy() if field == "n" else element(inner.expressions[0])
        found = _set_returning(n)
        if found is not None:
            kind, array = found
            return subscript(array) if kind == "subscripts" else element(array)
        return n

    select.set("expressions", [e.transform(swap) for e in select.expressions])
    positions = ", ".join(f"({i})" for i in range(1, _MAX_ELEMENTS + 1))
    select.join(
        f"(VALUES {positions}) AS _ea(n)", on=f"_ea.n <= {count}", copy=False, dialect="postgres"
    )
    parent = select.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    if isinstance(parent, exp.Select):  # (result.keys).x outside: the value itself
        for dot in list(parent.find_all(exp.Dot)):
            if isinstance(dot.this, exp.Paren) and isinstance(dot.this.this, exp.Column):
                dot.replace(dot.this.this.copy())


def _nested_query(node: exp.Expression) -> bool:
    """``node`` is a query of its own (its select list is expanded as its own)."""
    return isinstance(node, (exp.Select, exp.Subquery))


def _unnested_array(source: exp.Expression) -> tuple[exp.Expression, str] | None:
    """``(array, alias)`` of ``unnest(a) x`` (``pg_catalog.`` or not) as a FROM item."""
    if isinstance(source, exp.Unnest) and len(source.expressions) == 1:
        array, alias = source.expressions[0], source.args.get("alias")
    elif isinstance(source, exp.Table) and isinstance(source.this, exp.Explode):
        array, alias = source.this.this, source.args.get("alias")
    else:
        return None
    if not isinstance(alias, exp.TableAlias) or not alias.name or alias.columns:
        return None
    return array, alias.name


def unnest_in_from(select: exp.Select) -> None:
    """``SELECT … FROM unnest(a) x`` over a catalog array (psql's ``\\d+`` lists a table's
    options so: ``array(SELECT 'toast.' || x FROM unnest(tc.reloptions) x)``): the positions
    1…32 up to the array's length, ``x`` each element as text, so that an array read from the
    enclosing query correlates as a condition. The catalog's arrays are their text form
    (``{a,b}``) and their elements hold no spaces."""
    source = select.args.get("from_") or select.args.get("from")
    if not isinstance(source, exp.From) or select.args.get("joins"):
        return
    found = _unnested_array(source.this)
    if found is None:
        return
    array, name = found
    text = f"CAST({array.sql(dialect='postgres')} AS text)"
    words = f"trim(translate({text}, '{{}},', '   '))"
    count = (
        f"CASE WHEN {words} IS NULL OR {words} = '' THEN 0 ELSE length({words}) - "
        f"length(replace({words}, ' ', '')) + 1 END"
    )
    element = cast(
        exp.Expression, sqlglot.parse_one(f"split_part({words}, ' ', _un.n)", read="postgres")
    )

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and n.name == name and n.table in ("", name):
            return element.copy()
        return n

    for key in ("expressions", "where", "order"):
        value = select.args.get(key)
        if isinstance(value, list):
            select.set(key, [e.transform(swap) for e in value])
        elif isinstance(value, exp.Expression):
            select.set(key, value.transform(swap))
    positions = ", ".join(f"({i})" for i in range(1, _MAX_ELEMENTS + 1))
    values = sqlglot.parse_one(
        f"SELECT 1 FROM (VALUES {positions}) AS _un(n)",  # noqa: S608 (not run: parsed)
        read="postgres",
    )
    assert isinstance(values, exp.Select)
    source.set("this", (values.args.get("from_") or values.args["from"]).this)
    select.where(f"_un.n <= {count}", append=True, copy=False, dialect="postgres")


def _split_parts(split: exp.StringToArray) -> tuple[str, str]:
    """The text and the separator of ``string_to_array(text, separator)``, as SQL."""
    sep = split.expression
    text = split.this.sql(dialect="postgres")
    return text, (sep.sql(dialect="postgres") if isinstance(sep, exp.Expression) else "','")


def split_array_bound(node: exp.Expression) -> exp.Expression:
    """``array_lower|array_upper(string_to_array(t, sep), 1)`` (Grafana reads the search path
    so): 1 and the number of parts, NULL for the empty text (an empty array)."""
    if not isinstance(node, exp.Anonymous):
        return node
    name = str(node.name).lower()
    if name not in ("array_lower", "array_upper"):
        return node
    args = list(node.expressions)
    if len(args) != 2 or not isinstance(args[0], exp.StringToArray):
        return node
    if not isinstance(args[1], exp.Literal) or str(args[1].this) != "1":
        return node
    t, sep = _split_parts(args[0])
    value = (
        "1"
        if name == "array_lower"
        else f"(length({t}) - length(replace({t}, {sep}, ''))) / length({sep}) + 1"
    )
    sql = f"CASE WHEN {t} = '' THEN NULL ELSE {value} END"
    return cast(exp.Expression, sqlglot.parse_one(sql, read="postgres"))


def split_array_in_from(select: exp.Select) -> None:
    """``FROM …, string_to_array(t, sep) s`` (a one-row relation whose one column is the
    array): the FROM item dropped, each ``s[i]`` read as ``split_part(t, sep, i)`` and an
    unquoted ``user`` as ``current_user`` (what PostgreSQL reads it as)."""
    joins = select.args.get("joins") or []
    for join in list(joins):
        table = join.this
        split = table.this if isinstance(table, exp.Table) else None
        alias = table.args.get("alias") if isinstance(table, exp.Table) else None
        if (
            not isinstance(split, exp.StringToArray)
            or not isinstance(alias, exp.TableAlias)
            or not alias.name
            or alias.columns
            or join.args.get("on")
        ):
            continue
        t, sep = _split_parts(split)
        name = alias.name

        def swap(n: exp.Expression, name: str = name, t: str = t, sep: str = sep) -> exp.Expression:
            if (
                isinstance(n, exp.Bracket)
                and isinstance(n.this, exp.Column)
                and n.this.name == name
                and not n.this.table
                and len(n.expressions) == 1
            ):
                i = n.expressions[0].sql(dialect="postgres")
                return cast(
                    exp.Expression,
                    sqlglot.parse_one(f"split_part({t}, {sep}, {i})", read="postgres"),
                )
            if isinstance(n, exp.Column) and not n.table and n.name.lower() == "user":
                identifier = n.this
                if isinstance(identifier, exp.Identifier) and not identifier.quoted:
                    return exp.CurrentUser()
            return n

        for key in ("expressions", "where"):
            value = select.args.get(key)
            if isinstance(value, list):
                select.set(key, [e.transform(swap) for e in value])
            elif isinstance(value, exp.Expression):
                select.set(key, value.transform(swap))
        joins.remove(join)
    select.set("joins", joins or None)


def series_over_array(select: exp.Select) -> None:
    """``FROM generate_series(0|1, array_upper(a, 1)) s`` (psql's ``\\d`` walks a catalog
    array so) as the positions 0…32 joined by ``s`` between the bounds in WHERE, so that a
    bound read from the enclosing query correlates as a condition."""
    source = select.args.get("from_") or select.args.get("from")
    table = source.this if isinstance(source, exp.From) else None
    series = table.this if isinstance(table, exp.Table) else None
    if not isinstance(series, exp.ExplodingGenerateSeries) or not isinstance(table, exp.Table):
        return
    start, end = series.args.get("start"), series.args.get("end")
    name = table.alias_or_name
    literal = isinstance(start, exp.Literal) and not start.is_string
    if (
        not isinstance(start, exp.Expression)
        or (not literal and select.args.get("joins"))
        or (literal and str(start.this) not in ("0", "1"))
        or not isinstance(end, exp.Expression)
        or not name
    ):
        return
    bound = end.sql(dialect="postgres").lower()
    if "array_upper" not in bound and "length(" not in bound:
        return
    positions = ", ".join(f"({i})" for i in range(_MAX_ELEMENTS + 1))
    values = sqlglot.parse_one(
        f"SELECT 1 FROM (VALUES {positions}) AS {name}({name})",  # noqa: S608 (not run: parsed)
        read="postgres",
    )
    assert isinstance(values, exp.Select) and isinstance(source, exp.From)
    source.set("this", (values.args.get("from_") or values.args["from"]).this)
    low = start.sql(dialect="postgres")
    bounds = f"{name}.{name} >= ({low}) AND {name}.{name} <= ({end.sql(dialect='postgres')})"
    select.where(bounds, append=True, copy=False, dialect="postgres")


def enclosing_select(node: exp.Expression) -> exp.Select | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent
