"""Recognising and answering the catalog queries clients send.

This is deliberately not a SQL engine. A catalog query is answered in three moves:

1. **rows**: its FROM clause picks the row set — one row per column of a relation when it
   reads ``pg_attribute`` (or ``information_schema.columns``), one per relation for
   ``pg_class`` (``information_schema.tables``), the namespaces, the database, the role, the
   types — each row a dict of every catalog column that describes it (``relname``, ``nspname``,
   ``attname``, ``format_type``…); an inner join with a relation spate never has rows in
   (``pg_index``, ``pg_constraint``, ``pg_inherits``…) gives no rows;
2. **filters**: the WHERE conditions clients use to pick objects (an oid, a name or a name
   pattern, relkinds, a schema) are applied; other conditions are ignored;
3. **columns**: each select item is evaluated on the row — a column reference, a literal, the
   function shims (``format_type``, ``pg_get_userbyid``…), a simple CASE; anything else
   (sub-selects, aggregates) is NULL.

Queries without FROM (``SELECT version()``, ``current_setting('x')``) evaluate their items
once. The test suite runs the queries psql, psycopg, SQLAlchemy and asyncpg send.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import pyarrow as pa

from spate.pgwire import catalog_indexes, lexer
from spate.pgwire import types as pgt
from spate.pgwire.catalog_rows import (
    OID_COLUMNS,
    format_type,
    from_tables,
    row_set,
)
from spate.pgwire.engine import Relation
from spate.pgwire.lexer import depths

_TOP_WORDS: Final = re.compile(
    r"\b(SELECT|FROM|WHERE|GROUP|ORDER|LIMIT|UNION|HAVING|OFFSET|WINDOW)\b", re.I
)


def _top_level(sql: str) -> list[tuple[int, str]]:
    """Positions of the top-level (depth 0, outside quotes) keywords of ``sql``."""
    depth_at = depths(sql)
    out = []
    for m in _TOP_WORDS.finditer(sql):
        if depth_at[m.start()] == 0:
            out.append((m.start(), m.group(1).upper()))
    return out


def _split_top(text: str, sep: str = ",") -> list[str]:
    depth = depths(text)
    parts, start = [], 0
    for i, c in enumerate(text):
        if c == sep and depth[i] == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _clauses(sql: str) -> dict[str, str]:
    """The main SELECT's clauses: SELECT, FROM, WHERE… (the first of each at top level)."""
    words = _top_level(sql)
    out: dict[str, str] = {}
    for i, (pos, word) in enumerate(words):
        if word in out:
            if word == "SELECT":
                break  # a second SELECT (UNION): keep the first
            continue
        end = words[i + 1][0] if i + 1 < len(words) else len(sql)
        out[word] = sql[pos + len(word) : end].strip()
    return out


_AS: Final = re.compile(r'^(.*?)\s+(?:AS\s+)?("(?:[^"]|"")+"|[A-Za-z_][\w$]*)$', re.I | re.S)
_KEYWORDS_NOT_ALIAS: Final = frozenset({"end", "null", "true", "false", "distinct"})


def _item(text: str) -> tuple[str, str]:
    """(expression, output name) of a select item."""
    m = _AS.match(text)
    if (
        m
        and m.group(2).lower() not in _KEYWORDS_NOT_ALIAS
        and not m.group(1).rstrip().endswith(("::", "=", "<", ">", "-", "+", "*", "/", "||"))
    ):
        expr, alias = m.group(1).strip(), m.group(2)
        if re.search(r"\bAS$", expr, re.I):
            expr = expr[:-2].strip()
        if expr and not expr.upper().endswith((" THEN", " ELSE", " WHEN", " CASE", " AND", " OR")):
            return expr, lexer_unquote(alias)
    return text, _default_name(text)


def lexer_unquote(name: str) -> str:
    if name.startswith('"'):
        return name[1:-1].replace('""', '"')
    return name.lower()


def _default_name(expr: str) -> str:
    e = _strip_casts(expr.strip())
    m = re.fullmatch(r"(?:[\w$]+\.)*([\w$]+)", e)
    if m:
        return m.group(1).lower()
    m = re.fullmatch(r"(?:[\w$]+\.)*([\w$]+)\s*\(.*\)", e, re.S)
    if m:
        return m.group(1).lower()
    if e.upper().startswith("CASE"):
        return "case"
    return "?column?"


def _strip_casts(expr: str) -> str:
    return re.sub(r"\s*::\s*(?:pg_catalog\.)?[\w\"]+(?:\s*\[\])?", "", expr).strip()


def select_list_names(sql: str) -> list[str]:
    clauses = _clauses(lexer.strip_comments(sql))
    sel = clauses.get("SELECT", "")
    sel = re.sub(r"^DISTINCT\s+(ON\s*\([^)]*\)\s*)?", "", sel, flags=re.I)
    return [_item(i)[1] for i in _split_top(sel)]


# --- filters -------------------------------------------------------------------------------------

_LIT: Final = re.compile(r"'((?:[^']|'')*)'")
_COL: Final = r"(?:[\w$\"]+\s*\.\s*)*\"?([A-Za-z_][\w$]*)\"?"


def _conjuncts(where: str) -> list[str]:
    depth = depths(where)
    parts, start = [], 0
    for m in re.finditer(r"\bAND\b", where, re.I):
        if depth[m.start()] == 0:
            parts.append(where[start : m.start()])
            start = m.end()
    parts.append(where[start:])
    out = []
    for p in parts:
        p = p.strip()
        while p.startswith("(") and p.endswith(")") and depths(p)[len(p) - 1] == 1:
            inner = p[1:-1].strip()
            if "(" in inner and inner.upper().startswith("SELECT"):
                break
            p = inner
        out.append(p)
    return out


def _clean(text: str) -> str:
    text = re.sub(r"\s+COLLATE\s+(?:pg_catalog\.)?\"?\w+\"?", "", text, flags=re.I)
    text = re.sub(
        r"CAST\s*\(\s*('(?:[^']|'')*')\s+AS\s+([\w\s.\[\]\"]+?)\s*\)", r"\1::\2", text, flags=re.I
    )
    return text


def _regclass_oid(name: str, relations: Sequence[Relation]) -> int | None:
    """The oid of ``name``, qualified (``spate_catalog.replicas``) or found on the search path
    (``public``)."""
    schema, _, rel = name.rpartition(".")
    schema = schema.strip('"') or "public"
    for r in relations:
        if r.name == rel.strip('"') and r.namespace == schema:
            return r.oid
    return None


def _lits(text: str) -> list[str]:
    vals = [v.replace("''", "'") for v in _LIT.findall(text)]
    if len(vals) == 1 and vals[0].startswith("{") and vals[0].endswith("}"):
        return [v.strip().strip('"') for v in vals[0][1:-1].split(",") if v.strip()]
    return vals


def _filter(
    rows: list[dict[str, Any]], where: str | None, relations: Callable[[], Sequence[Relation]]
) -> list[dict[str, Any]]:
    if not where or not rows:
        return rows
    for cond in _conjuncts(_clean(where)):
        rows = [r for r in rows if _test(cond, r, relations) is not False]
    return rows


def _test(
    cond: str, row: dict[str, Any], relations: Callable[[], Sequence[Relation]]
) -> bool | None:
    """True / False when ``cond`` is understood and known for ``row``; ``None`` to ignore it."""
    m = re.fullmatch(
        rf"{_COL}\s*(=|<>|!=)\s*('(?:[^']|'')*'|\d+)\s*(?:::\s*([\w.\"]+))?", cond, re.I | re.S
    )
    if m and m.group(1) in row:
        col, op, lit, cast = m.group(1), m.group(2), m.group(3), (m.group(4) or "").lower()
        value: Any = lit[1:-1].replace("''", "'") if lit.startswith("'") else int(lit)
        current = row[col]
        if cast.endswith("regclass"):
            value = _regclass_oid(str(value), relations())
        elif isinstance(current, int) and not isinstance(current, bool):
            try:
                value = int(value)
            except ValueError:
                return False
        elif isinstance(current, bool):
            value = str(value).lower() in ("t", "true", "1")
        eq = current == value
        return eq if op == "=" else not eq
    m = re.fullmatch(
        rf"{_COL}\s*(=|<>|!=)\s*((?:pg_catalog\s*\.\s*)?(?!ANY\b|ALL\b|SOME\b)\w+\s*\(.*\))",
        cond,
        re.I | re.S,
    )
    if m and m.group(1) in row:
        value = _eval(m.group(3), {}, {}, relations)
        if value is None:
            return False
        eq = row[m.group(1)] == value
        return eq if m.group(2) == "=" else not eq
    m = re.fullmatch(
        rf"{_COL}\s*(OPERATOR\s*\(\s*(?:pg_catalog\s*\.\s*)?~\s*\)|!~|~)\s*('(?:[^']|'')*')",
        cond,
        re.I | re.S,
    )
    if m and m.group(1) in row:
        pattern = m.group(3)[1:-1].replace("''", "'")
        try:
            hit = re.search(pattern, str(row[m.group(1)] or "")) is not None
        except re.error:
            return None
        return not hit if m.group(2) == "!~" else hit
    m = re.fullmatch(rf"{_COL}\s+(NOT\s+)?IN\s*\((.*)\)", cond, re.I | re.S)
    if m and m.group(1) in row and _LIT.search(m.group(3)):
        hit = str(row[m.group(1)]) in _lits(m.group(3))
        return not hit if m.group(2) else hit
    m = re.fullmatch(rf"{_COL}\s*=\s*ANY\s*\((.*)\)", cond, re.I | re.S)
    if m and m.group(1) in row and _LIT.search(m.group(2)):
        return str(row[m.group(1)]) in _lits(m.group(2))
    m = re.fullmatch(r"(?:pg_catalog\s*\.\s*)?pg_table_is_visible\s*\(\s*[\w.]+\s*\)", cond, re.I)
    if m and "nspname" in row:  # visible: on the search path, which is public
        return row["nspname"] in ("public", "pg_catalog")
    m = re.fullmatch(rf"(NOT\s+)?{_COL}", cond, re.I)
    if m and m.group(2) in row and isinstance(row[m.group(2)], bool):
        return bool(row[m.group(2)]) != bool(m.group(1))
    return None


# --- select items --------------------------------------------------------------------------------

_ALWAYS_TRUE: Final = frozenset(
    {
        "pg_table_is_visible",
        "pg_type_is_visible",
        "pg_collation_is_visible",
        "pg_function_is_visible",
        "has_table_privilege",
        "has_schema_privilege",
    }
)
_FUNC: Final = re.compile(r"(?:pg_catalog\s*\.\s*)?([A-Za-z_]\w*)\s*\((.*)\)", re.S)


def _eval(expr: str, row: Mapping[str, Any], vars: Mapping[str, str],
          relations: Callable[[], Sequence[Relation]]) -> Any:  # fmt: skip
    e = _clean(expr).strip()
    cast = re.search(r"::\s*(?:pg_catalog\s*\.\s*)?\"?(\w+)\"?(?:\s*\[\])?\s*$", e)
    if cast and depths(e)[cast.start()] == 0:
        inner = e[: cast.start()].strip()
        target = cast.group(1).lower()
        v = _eval(inner, row, vars, relations)
        if target in ("regclass",) and isinstance(v, str):
            return _regclass_oid(v, relations())
        if target in ("regtype",) and isinstance(v, int):
            return pgt.BY_OID[v].name if v in pgt.BY_OID else str(v)
        if target in ("text", "varchar", "name") and v is not None and not isinstance(v, str):
            return str(v)
        return v
    if e.startswith("(") and e.endswith(")") and depths(e)[len(e) - 1] == 1:
        inner = e[1:-1].strip()
        if re.match(r"SELECT\b", inner, re.I):
            return None
        return _eval(inner, row, vars, relations)
    if e.startswith("'") or e[:2] in ("E'", "e'"):
        lits = _LIT.fullmatch(e.lstrip("Ee"))
        return lits.group(1).replace("''", "'") if lits else None
    if re.fullmatch(r"-?\d+", e):
        return int(e)
    up = e.upper()
    if up in ("TRUE", "FALSE"):
        return up == "TRUE"
    if up == "NULL":
        return None
    low = e.lower()
    if low in ("current_user", "session_user", "user", "current_role"):
        return vars.get("user", "")
    if low in ("current_schema", "current_schema()"):
        return "public"
    if low == "current_catalog":
        return vars.get("database", "")
    if up.startswith("CASE"):
        return _case(e, row, vars, relations)
    m = re.fullmatch(_COL, e)
    if m:
        return row.get(m.group(1))
    m = _FUNC.fullmatch(e)
    if m:
        return _call(m.group(1).lower(), _split_top(m.group(2)), row, vars, relations)
    return None


def _case(e: str, row: Mapping[str, Any], vars: Mapping[str, str],
          relations: Callable[[], Sequence[Relation]]) -> Any:  # fmt: skip
    body = re.fullmatch(r"CASE\s+(.*?)\s*END", e, re.I | re.S)
    if not body:
        return None
    text = body.group(1)
    else_m = re.search(r"\bELSE\b(.*)$", text, re.I | re.S)
    default = else_m.group(1).strip() if else_m else "NULL"
    text = text[: else_m.start()] if else_m else text
    arms = re.split(r"\bWHEN\b", text, flags=re.I)
    subject = arms[0].strip()
    for arm in arms[1:]:
        parts = re.split(r"\bTHEN\b", arm, maxsplit=1, flags=re.I)
        if len(parts) != 2:
            continue
        cond, value = parts
        if subject:
            hit = _eval(subject, row, vars, relations) == _eval(cond, row, vars, relations)
        else:
            hit = _test(_clean(cond.strip()), dict(row), relations) is True
        if hit:
            return _eval(value.strip(), row, vars, relations)
    return _eval(default, row, vars, relations)


def _oid(value: Any, relations: Sequence[Relation]) -> Any:
    """A relation's oid given as a number, as ``'16386'::oid`` or as ``'name'::regclass``."""
    if isinstance(value, str):
        return int(value) if value.isdigit() else _regclass_oid(value, relations)
    return value


def _description(name: str, oid: Any, sub: Any, relations: Sequence[Relation]) -> str | None:
    """``obj_description(oid[, 'pg_class'])`` and ``col_description(oid, attnum)``: the
    ``COMMENT ON`` texts of a relation and of its columns."""
    oid = _oid(oid, relations)
    r = next((r for r in relations if r.oid == oid), None)
    if r is None:
        return None
    if name == "obj_description":
        return r.description if sub in (None, "pg_class") else None
    if isinstance(sub, int) and 1 <= sub <= len(r.column_descriptions):
        return r.column_descriptions[sub - 1]
    return None


def _call(name: str, args: list[str], row: Mapping[str, Any], vars: Mapping[str, str],
          relations: Callable[[], Sequence[Relation]]) -> Any:  # fmt: skip
    def arg(i: int) -> Any:
        return _eval(args[i], row, vars, relations) if i < len(args) else None

    if name == "version":
        return f"PostgreSQL {vars.get('server_version', '9.5.0')} (spate) on x86_64-pc-linux-gnu"
    if name == "current_schema":
        return "public"
    if name == "current_schemas":
        return ["pg_catalog", "public"] if arg(0) else ["public"]
    if name in ("current_database",):
        return vars.get("database", "")
    if name == "current_setting":
        key = str(arg(0)).lower()
        return vars.get(key)
    if name == "set_config":
        return arg(1)
    if name == "format_type":
        if "format_type" in row:
            return row["format_type"]
        oid = arg(0)
        return format_type(pgt.BY_OID[oid]) if isinstance(oid, int) and oid in pgt.BY_OID else None
    if name in ("obj_description", "col_description"):
        return _description(name, arg(0), arg(1), relations())
    if name == "pg_get_viewdef":
        oid = _oid(arg(0), relations())
        if oid is None and "definition" in row:
            return row["definition"]
        return next((r.definition for r in relations() if r.oid == oid), None)
    if name == "pg_get_indexdef":
        return row.get("indexdef")
    if name == "pg_get_userbyid":
        return vars.get("user", "")
    if name in _ALWAYS_TRUE:
        return True
    if name in ("pg_relation_is_publishable", "pg_is_in_recovery"):
        return False
    if name == "pg_encoding_to_char":
        return "UTF8"
    if name == "pg_backend_pid":
        return 0
    if name in ("to_regtype", "to_regclass"):
        v = arg(0)
        if not isinstance(v, str):
            return None
        if name == "to_regclass":
            return _regclass_oid(v, relations())
        t = pgt.BY_NAME.get(v.split(".")[-1].strip('"').lower())
        return t.oid if t is not None else None
    if name == "coalesce":
        for i in range(len(args)):
            v = arg(i)
            if v is not None:
                return v
        return None
    return None


def _output_field(name: str, expr: str, values: list[Any]) -> pa.Field:
    ref = re.fullmatch(_COL, _strip_casts(_clean(expr).strip()))
    if ref and ref.group(1) in OID_COLUMNS and all(isinstance(v, int) or v is None for v in values):
        return pgt.field_with_type(name, "oid", pa.int64())
    kinds = {type(v) for v in values if v is not None}
    if kinds == {bool}:
        return pa.field(name, pa.bool_())
    if kinds == {int}:
        return pa.field(name, pa.int64())
    if kinds == {list}:
        return pa.field(name, pa.list_(pa.string()))
    return pa.field(name, pa.string())


def answer_known(
    sql: str, vars: Mapping[str, str], relations: Callable[[], Sequence[Relation]]
) -> pa.Table | None:
    """The answer to a catalog query (``None`` when it is not one this module can read)."""
    text = lexer.strip_comments(sql).strip().rstrip(";")
    special = catalog_indexes.sqlalchemy_indexes(text, relations())
    if special is not None:
        return special
    aliases = catalog_indexes.roles(text)
    if aliases:
        text = catalog_indexes.rewrite(text, aliases)
    clauses = _clauses(text)
    if "SELECT" not in clauses:
        return None
    sel = re.sub(r"^DISTINCT\s+(ON\s*\([^)]*\)\s*)?", "", clauses["SELECT"], flags=re.I)
    items = [_item(i) for i in _split_top(sel)]
    if "FROM" in clauses:
        rows = row_set(from_tables(clauses["FROM"]), relations, vars, aliases)
        rows = _filter(rows, clauses.get("WHERE"), relations)
    else:
        rows = [{}]
    if "LIMIT" in clauses and re.fullmatch(r"\d+", clauses["LIMIT"].strip()):
        rows = rows[: int(clauses["LIMIT"].strip())]
    if len(items) == 1 and re.fullmatch(r"count\s*\(\s*\*?\s*\)", items[0][0], re.I):
        return pa.table({items[0][1]: pa.array([len(rows)], pa.int64())})
    columns = [[_eval(expr, row, vars, relations) for row in rows] for expr, _ in items]
    names = []
    seen: dict[str, int] = {}
    for _, n in items:
        seen[n] = seen.get(n, -1) + 1
        names.append(n if not seen[n] else f"{n}_{seen[n]}")
    fields = [_output_field(n, e, c) for n, (e, _), c in zip(names, items, columns, strict=True)]
    return pa.table(
        [pa.array(c, f.type) for f, c in zip(fields, columns, strict=True)],
        schema=pa.schema(fields),
    )
