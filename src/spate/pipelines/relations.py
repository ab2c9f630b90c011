"""A Spark Connect plan (the DataFrame a query function returns) as one Spark SQL query.

Each relation becomes a query whose output columns are known by name (:class:`Rel`); an
operator wraps its input as a subquery. DataFrame semantics are kept where SQL differs:
``withColumn`` replaces a column of the same name in place, ``union`` matches columns by
position and ``unionByName`` by name, ``join(on=[...])`` outputs the key columns once (first),
``dropDuplicates()`` is ``DISTINCT``. What no incremental computation can reproduce exactly
(``limit`` without ``orderBy``, ``dropDuplicates(subset)``, a sample, a non-deterministic
function, a Python UDF) raises :class:`~spate.pipelines.errors.NotMaintainable`.

Why the Connect plan, not Catalyst's: see docs/pipelines.md ("How spate reads your DataFrame").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify

from spate.pipelines.errors import NotMaintainable
from spate.pipelines.expressions import (
    ExprContext,
    ident,
    nondeterministic_call,
    sort_order_sql,
    translate_expr,
)

__all__ = ["Rel", "SourceResolver", "Translator", "sql_rel"]

SourceResolver = Callable[[Any, str], tuple[str, list[str]]]
"""A ``spark.read``/``readStream`` of files (its Read.DataSource, the dataset reading it) → the
spate relation holding its rows and its columns."""

_JOINS = {1: "INNER", 2: "FULL OUTER", 3: "LEFT OUTER", 4: "RIGHT OUTER", 5: "LEFT ANTI",
          6: "LEFT SEMI", 7: "CROSS", 0: "INNER"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rel:
    sql: str
    columns: list[str]
    plan_ids: frozenset[int] = frozenset()
    alias: str | None = None
    reads: frozenset[str] = field(default_factory=frozenset)


def check_sql(tree: exp.Expression, dataset: str, where: str) -> None:
    name = nondeterministic_call(tree)
    if name is not None:
        raise NotMaintainable(dataset, f"{name}()", where, "it is not deterministic")
    for node in tree.walk():
        if isinstance(node, exp.Limit) and not (
            isinstance(node.parent, exp.Select) and node.parent.args.get("order")
        ):
            raise NotMaintainable(
                dataset, "LIMIT without ORDER BY", where, "which rows it keeps is arbitrary"
            )


def sql_rel(query: str, schemas: Mapping[str, list[str]], dataset: str, where: str) -> Rel:
    """A SQL query's :class:`Rel`: its output columns (``*`` expanded against ``schemas``) and
    the names it reads."""
    try:
        tree = sqlglot.parse_one(query, read="spark")
    except sqlglot.ParseError as e:
        raise NotMaintainable(dataset, "SQL", where, f"it does not parse: {e}") from None
    check_sql(tree, dataset, where)  # type: ignore[arg-type]
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    reads = frozenset(t.name for t in tree.find_all(exp.Table) if t.name and t.name not in ctes)
    schema: dict[str, object] = {
        n: {c: "STRING" for c in cols} for n, cols in schemas.items() if n in reads
    }
    try:
        q = qualify(tree.copy(), schema=schema, dialect="spark", validate_qualify_columns=False)
        columns = list(q.named_selects) if isinstance(q, exp.Query) else []
    except Exception as e:
        raise NotMaintainable(dataset, "SQL", where, f"its columns do not resolve: {e}") from None
    if not isinstance(tree, exp.Query) or not columns or "*" in columns:
        raise NotMaintainable(dataset, "SQL", where, "its output columns are not known")
    return Rel(sql=query, columns=columns, reads=reads)


class Translator:
    """Translates the plans of one dataset: ``schemas`` holds the columns of every name it may
    read (the datasets before it, spate's tables and views); ``sources`` resolves file reads.

    What cannot be maintained names the line of the DataFrame call that made the relation being
    translated (``sites``: plan id → ``file:line``), or ``where`` (the flow's definition) for a
    relation whose site is not known; an expression names its own call site where it has one."""

    def __init__(
        self,
        dataset: str,
        where: str,
        schemas: Mapping[str, list[str]],
        sources: SourceResolver,
        *,
        sites: Mapping[int, str] | None = None,
    ) -> None:
        self.dataset, self.where = dataset, where
        self.schemas, self.sources = schemas, sources
        self.sites: Mapping[int, str] = sites if sites is not None else {}
        self._at = where
        """The site of the relation being translated."""
        self._n = 0

    def _alias(self) -> str:
        self._n += 1
        return f"_s{self._n}"

    def fail(self, operator: str, why: str) -> NotMaintainable:
        return NotMaintainable(self.dataset, operator, self._at, why)

    def ctx(self, rel: Rel, qualifiers: Mapping[int, str] | None = None,
            sides: Mapping[str, list[str]] | None = None) -> ExprContext:  # fmt: skip
        def star(qual: str | None) -> list[str]:
            if qual is not None and sides is not None and qual in sides:
                return sides[qual]
            return rel.columns

        return ExprContext(self.dataset, self._at, qualifiers or {}, star)

    def wrap(self, rel: Rel) -> tuple[str, str]:
        """``rel`` as a FROM item and the alias it is known by."""
        alias = rel.alias or self._alias()
        return f"({rel.sql}) AS {ident(alias)}", alias

    def select(self, rel: Rel, items: list[tuple[str, str]], tail: str = "",
               distinct: bool = False) -> Rel:  # fmt: skip
        src, _ = self.wrap(rel)
        body = ", ".join(f"{sql} AS {ident(name)}" for sql, name in items)
        d = "DISTINCT " if distinct else ""
        return Rel(
            sql=f"SELECT {d}{body} FROM {src}{tail}",
            columns=[n for _, n in items],
            plan_ids=rel.plan_ids,
            reads=rel.reads,
        )

    def passthrough(self, rel: Rel) -> list[tuple[str, str]]:
        return [(ident(c), c) for c in rel.columns]

    # -- relations -----------------------------------------------------------------------------

    def relation(self, r: Any) -> Rel:
        kind = r.WhichOneof("rel_type")
        pid = frozenset({r.common.plan_id}) if r.HasField("common") else frozenset()
        outer = self._at
        self._at = next((self.sites[p] for p in pid if p in self.sites), self.where)
        try:
            method = getattr(self, f"_{kind}", None)
            if method is None:
                raise self.fail(f"the DataFrame operation {kind}", "spate does not translate it")
            rel: Rel = method(getattr(r, kind))
        finally:
            self._at = outer
        return Rel(rel.sql, rel.columns, rel.plan_ids | pid, rel.alias, rel.reads)

    def _read(self, r: Any) -> Rel:
        if r.HasField("named_table"):
            name = r.named_table.unparsed_identifier.split(".")[-1].strip("`")
            if name not in self.schemas:
                raise self.fail(
                    f"spark.read.table({name!r})",
                    f"no dataset, table or view is named {name!r}; known: "
                    f"{', '.join(sorted(self.schemas)) or '(none)'}",
                )
            cols = self.schemas[name]
            body = ", ".join(ident(c) for c in cols)
            return Rel(f"SELECT {body} FROM {ident(name)}", list(cols), reads=frozenset({name}))
        relation, cols = self.sources(r.data_source, self.dataset)
        body = ", ".join(ident(c) for c in cols)
        return Rel(f"SELECT {body} FROM {ident(relation)}", cols, reads=frozenset({relation}))

    def _sql(self, r: Any) -> Rel:
        if r.args or r.named_arguments or r.pos_args or r.pos_arguments:
            raise self.fail("spark.sql with arguments", "not supported")
        return sql_rel(r.query, self.schemas, self.dataset, self._at)

    def _subquery_alias(self, r: Any) -> Rel:
        inner = self.relation(r.input)
        return Rel(inner.sql, inner.columns, inner.plan_ids, r.alias, inner.reads)

    def _project(self, r: Any) -> Rel:
        rel = self.relation(r.input)
        ctx = self.ctx(rel)
        items: list[tuple[str, str]] = []
        for e in r.expressions:
            if e.WhichOneof("expr_type") == "unresolved_star":
                items += self.passthrough(rel)
                continue
            t = translate_expr(e, ctx)
            items.append((t.sql.rsplit(" AS ", 1)[0] if e.HasField("alias") else t.sql, t.name))
        return self.select(rel, items)

    def _filter(self, r: Any) -> Rel:
        rel = self.relation(r.input)
        cond = translate_expr(r.condition, self.ctx(rel))
        return self.select(rel, self.passthrough(rel), f" WHERE {cond.sql}")

    def _with_columns(self, r: Any) -> Rel:
        rel = self.relation(r.input)
        ctx = self.ctx(rel)
        items = self.passthrough(rel)
        for a in r.aliases:
            t = translate_expr(a.expr, ctx)
            name = a.name[0]
            hit = [i for i, (_, n) in enumerate(items) if n.lower() == name.lower()]
            if hit:
                items[hit[0]] = (t.sql, name)
            else:
                items.append((t.sql, name))
        return self.select(rel, items)

    def _with_columns_renamed(self, r: Any) -> Rel:
        rel = self.relation(r.input)
        renames = {k.lower(): v for k, v in r.rename_columns_map.items()}
        renames |= {x.col_name.lower(): x.new_col_name for x in r.renames}
        return self.select(rel, [(ident(c), renames.get(c.lower(), c)) for c in rel.columns])

    def _to_df(self, r: Any) -> Rel:
        rel = self.relation(r.input)
        if len(r.column_names) != len(rel.columns):
            raise self.fail("toDF", f"{len(r.column_names)} names for {len(rel.columns)} columns")
        return self.select(
            rel, [(ident(c), n) for c, n in zip(rel.columns, r.column_names, strict=True)]
        )

    def _drop(self, r: Any) -> Rel:
        rel = self.relation(r.input)
        names = {n.lower() for n in r.column_names}
        for e in r.columns:
            names.add(translate_expr(e, self.ctx(rel)).name.lower())
        return self.select(rel, [(ident(c), c) for c in rel.columns if c.lower() not in names])

    def _aggregate(self, r: Any) -> Rel:
        if r.group_type != 1 or r.HasField("pivot"):
            raise self.fail("groupBy with rollup, cube, pivot or grouping sets", "not supported")
        rel = self.relation(r.input)
        ctx = self.ctx(rel)
        keys = [translate_expr(e, ctx) for e in r.grouping_expressions]
        aggs = [translate_expr(e, ctx) for e in r.aggregate_expressions]
        items = [(k.sql, k.name) for k in keys]
        items += [(a.sql.rsplit(" AS ", 1)[0] if " AS `" in a.sql else a.sql, a.name)
                  for a in aggs]  # fmt: skip
        group = f" GROUP BY {', '.join(k.sql for k in keys)}" if keys else ""
        return self.select(rel, items, group)

    def _deduplicate(self, r: Any) -> Rel:
        rel = self.relation(r.input)
        subset = {c.lower() for c in r.column_names}
        if r.all_columns_as_keys or not subset or subset == {c.lower() for c in rel.columns}:
            return self.select(rel, self.passthrough(rel), distinct=True)
        raise self.fail(
            f"dropDuplicates({sorted(subset)})",
            "which row of each duplicate group Spark keeps is arbitrary; use groupBy with an "
            "aggregate (max, min) or a window with orderBy instead",
        )

    def _sort(self, r: Any) -> Rel:
        # An order alone means nothing to a dataset (it is a set); under a limit it does.
        return self.relation(r.input)

    def _limit(self, r: Any) -> Rel:
        inner = r.input
        if inner.WhichOneof("rel_type") != "sort":
            raise self.fail(f"limit({r.limit}) without orderBy", "which rows it keeps is arbitrary")
        rel = self.relation(inner.sort.input)
        ctx = self.ctx(rel)
        order = ", ".join(sort_order_sql(o, ctx) for o in inner.sort.order)
        return self.select(rel, self.passthrough(rel), f" ORDER BY {order} LIMIT {r.limit}")

    def _set_op(self, r: Any) -> Rel:
        left, right = self.relation(r.left_input), self.relation(r.right_input)
        op = {1: "INTERSECT", 2: "UNION", 3: "EXCEPT"}.get(r.set_op_type)
        if op is None:
            raise self.fail("a set operation", "unknown type")
        columns = list(left.columns)
        lcols = [ident(c) for c in left.columns]
        rcols = [ident(c) for c in right.columns]
        if r.by_name:
            # A missing column's NULL stands in the branch's own select list: there it takes
            # the other branch's type, as Spark's untyped NULL does; inside a subquery it
            # would be a text column, which a number column does not union with.
            lower = {c.lower(): c for c in right.columns}
            rcols = []
            for c in left.columns:
                if c.lower() in lower:
                    rcols.append(ident(lower[c.lower()]))
                elif r.allow_missing_columns:
                    rcols.append("NULL")
                else:
                    raise self.fail("unionByName", f"column {c!r} is missing on the right")
            if r.allow_missing_columns:
                on_left = {x.lower() for x in left.columns}
                extra = [c for c in right.columns if c.lower() not in on_left]
                columns += extra
                lcols += ["NULL"] * len(extra)
                rcols += [ident(c) for c in extra]
        elif len(left.columns) != len(right.columns):
            raise self.fail(op.lower(), f"{len(left.columns)} columns vs {len(right.columns)}")
        all_ = " ALL" if r.is_all else (" DISTINCT" if op != "UNION" else "")
        ls, _ = self.wrap(left)
        rs, _ = self.wrap(right)
        lsel = ", ".join(f"{s} AS {ident(c)}" for s, c in zip(lcols, columns, strict=True))
        rsel = ", ".join(rcols)
        return Rel(
            sql=f"SELECT {lsel} FROM {ls} {op}{all_} SELECT {rsel} FROM {rs}",
            columns=columns,
            plan_ids=left.plan_ids | right.plan_ids,
            reads=left.reads | right.reads,
        )

    def _join(self, r: Any) -> Rel:
        left, right = self.relation(r.left), self.relation(r.right)
        kind = _JOINS[r.join_type]
        ls, la = self.wrap(left)
        rs, ra = self.wrap(right)
        qualifiers = {p: la for p in left.plan_ids} | {p: ra for p in right.plan_ids}
        sides = {la: left.columns, ra: right.columns}
        semi = kind in ("LEFT ANTI", "LEFT SEMI")
        items: list[tuple[str, str]] = []
        if r.using_columns:
            keys = list(r.using_columns)
            lk = {k.lower() for k in keys}
            conds = [f"{ident(la)}.{ident(k)} = {ident(ra)}.{ident(k)}" for k in keys]
            on = " ON " + " AND ".join(conds)
            for k in keys:
                if kind == "FULL OUTER":
                    sql = f"coalesce({ident(la)}.{ident(k)}, {ident(ra)}.{ident(k)})"
                else:
                    sql = f"{ident(ra if kind == 'RIGHT OUTER' else la)}.{ident(k)}"
                items.append((sql, k))
            items += [(f"{ident(la)}.{ident(c)}", c) for c in left.columns if c.lower() not in lk]
            if not semi:
                items += [(f"{ident(ra)}.{ident(c)}", c) for c in right.columns
                          if c.lower() not in lk]  # fmt: skip
        else:
            on = ""
            if r.HasField("join_condition"):
                ctx = self.ctx(Rel("", left.columns + right.columns), qualifiers, sides)
                on = " ON " + translate_expr(r.join_condition, ctx).sql
            elif kind != "CROSS":
                kind = "CROSS"
            items += [(f"{ident(la)}.{ident(c)}", c) for c in left.columns]
            if not semi:
                items += [(f"{ident(ra)}.{ident(c)}", c) for c in right.columns]
        body = ", ".join(f"{sql} AS {ident(n)}" for sql, n in items)
        return Rel(
            sql=f"SELECT {body} FROM {ls} {kind} JOIN {rs}{on}",
            columns=[n for _, n in items],
            plan_ids=left.plan_ids | right.plan_ids,
            reads=left.reads | right.reads,
        )
