"""A JVM-free SQL engine for planner tests: spate's SQL planner + the IR's reference evaluator.

Tables live in memory; views and materialized views are evaluated from their plans when read.
This checks binding, typing and lowering (PostgreSQL ≠ this engine points at the planner), not
incremental execution (that is the Environment's and the corpus runner's job).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from spate.ids import GlobalId
from spate.plan.relation import RelationExpr
from spate.repr.types import Row
from spate.sql import MemoryCatalog, parse, plan_statement
from spate.sql import statements as st
from spate.sql.catalog import CatalogObject
from spate.testing.reference import evaluate


@dataclass
class Result:
    names: list[str]
    rows: list[Row]


@dataclass
class ReferenceEngine:
    catalog: MemoryCatalog = field(
        default_factory=lambda: MemoryCatalog(clusters=["default", "slt"])
    )
    tables: dict[GlobalId, Counter[Row]] = field(default_factory=dict)
    views: dict[GlobalId, RelationExpr] = field(default_factory=dict)
    now: int = 1_700_000_000_000

    def sql(self, text: str, dialect: str = "postgres") -> Result | None:
        out: Result | None = None
        for parsed in parse(text, dialect=dialect):
            stmt = plan_statement(parsed, self.catalog)
            out = self.execute(stmt)
        return out

    def rows(self, text: str, dialect: str = "postgres") -> list[Row]:
        r = self.sql(text, dialect)
        assert r is not None
        return r.rows

    def bag(self, text: str, dialect: str = "postgres") -> Counter[Row]:
        return Counter(self.rows(text, dialect))

    def inputs(self) -> dict[GlobalId, Counter[Row]]:
        data: dict[GlobalId, Counter[Row]] = dict(self.tables)
        for id, plan in sorted(self.views.items(), key=lambda kv: kv[0]):
            data[id] = evaluate(plan, data, self.now)
        return data

    def evaluate(self, plan: RelationExpr) -> Counter[Row]:
        return evaluate(plan, self.inputs(), self.now)

    def execute(self, stmt: st.Statement) -> Result | None:
        if isinstance(stmt, st.CreateTable):
            if stmt.if_not_exists and self.catalog.lookup(stmt.name):
                return None
            obj = self.catalog.add(stmt.name, stmt.desc, "table", create_sql=stmt.sql)
            assert obj.id is not None
            self.tables[obj.id] = Counter()
            return None
        if isinstance(stmt, st.CreateView):
            if stmt.replace and self.catalog.lookup(stmt.name):
                self.drop(stmt.name)
            kind = "materialized view" if stmt.materialized else "view"
            cluster = (stmt.cluster or "default") if stmt.materialized else None
            obj = self.catalog.add(
                stmt.name,
                stmt.plan.desc,
                kind,
                create_sql=stmt.sql,
                cluster=cluster,
                types=stmt.types,
            )
            assert obj.id is not None
            self.views[obj.id] = stmt.plan
            return None
        if isinstance(stmt, st.CreateIndex):
            self.catalog.add(
                stmt.name,
                None,
                "index",
                on=stmt.on,
                key=stmt.key,
                cluster=stmt.cluster or "default",
            )
            return None
        if isinstance(stmt, st.Insert):
            obj = self._table(stmt.table)
            rows = list(stmt.rows) if stmt.rows is not None else self._expand(stmt.plan)
            assert obj.desc is not None
            valid = obj.desc.validate_rows(rows, collection=stmt.table)
            for r in valid:
                self.tables[obj.id][r] += 1  # type: ignore[index]
            return None
        if isinstance(stmt, st.Delete):
            obj = self._table(stmt.table)
            for r in self._expand(stmt.plan):
                self.tables[obj.id][r] -= 1  # type: ignore[index]
            self.tables[obj.id] += Counter()  # type: ignore[index]
            return None
        if isinstance(stmt, st.Update):
            obj = self._table(stmt.table)
            assert obj.desc is not None
            pairs = [(r[: stmt.arity], r[stmt.arity :]) for r in self._expand(stmt.plan)]
            obj.desc.validate_rows([new for _, new in pairs], collection=stmt.table)
            for old, new in pairs:
                self.tables[obj.id][old] -= 1  # type: ignore[index]
                self.tables[obj.id][new] += 1  # type: ignore[index]
            self.tables[obj.id] += Counter()  # type: ignore[index]
            return None
        if isinstance(stmt, st.CreateCluster):
            self.catalog.clusters.append(stmt.name)
            return None
        if isinstance(stmt, st.DropCluster):
            if stmt.name in self.catalog.clusters:
                self.catalog.clusters.remove(stmt.name)
            return None
        if isinstance(stmt, st.ShowVariable):
            values = {"cluster": "default", "transaction_isolation": "strict serializable"}
            return Result([stmt.name], [(values.get(stmt.name),)])
        if isinstance(stmt, st.DropObjects):
            for name in stmt.names:
                if self.catalog.lookup(name) is not None:
                    self.drop(name, cascade=stmt.cascade)
            return None
        if isinstance(stmt, st.Select):
            rows = self._expand(stmt.plan)
            if stmt.order_by:
                from spate.plan.evaluation.values import compare_by

                rows.sort(key=functools.cmp_to_key(lambda a, b: compare_by(stmt.order_by, a, b)))
            end = None if stmt.limit is None else stmt.offset + stmt.limit
            rows = [r[: stmt.width] for r in rows[stmt.offset : end]]
            return Result(list(stmt.names), rows)
        if isinstance(stmt, st.Rows):
            return Result(list(stmt.names), [tuple(r) for r in stmt.rows])
        return None

    def drop(self, name: str, *, cascade: bool = True) -> None:
        obj = self.catalog.items[name]
        dependents = [
            o.name
            for o in self.catalog.items.values()
            if (o.id in self.views and obj.id in self.views[o.id].depends_on()) or o.on == name
        ]
        if dependents and not cascade:
            raise ValueError(f"cannot drop {name}: {', '.join(dependents)} depend on it")
        for d in dependents:
            if d in self.catalog.items:
                self.drop(d)
        del self.catalog.items[name]
        if obj.id is not None:
            self.tables.pop(obj.id, None)
            self.views.pop(obj.id, None)

    def _table(self, name: str) -> CatalogObject:
        obj = self.catalog.lookup(name)
        assert obj is not None and obj.id is not None
        return obj

    def _expand(self, plan: RelationExpr | None) -> list[Row]:
        assert plan is not None
        bag = self.evaluate(plan)
        assert all(n > 0 for n in bag.values()), f"negative multiplicities: {bag}"
        return sorted((r for r, n in bag.items() for _ in range(n)), key=_sort_key)


def _sort_key(row: Row) -> Any:
    return tuple((v is None, str(type(v)), v if v is not None else 0) for v in row)
