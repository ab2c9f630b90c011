"""Reads of the ``pg_catalog`` and ``information_schema`` relations (:mod:`.pg_catalog`).

A plan that reads one of them is evaluated here, in this process, by
:func:`spate.plan.evaluation.relation.evaluate` (the semantics every renderer agrees with):
the catalog relations' contents are built from a snapshot of the catalog taken as the read
runs (:mod:`.pg_catalog_snapshot`, :mod:`.pg_catalog_rows`), and any other object the plan
reads is read as the SQL session reads it, whole, then joined here. A read is answered whole or
fails; nothing is left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from spate.environment.pg_catalog import by_id, is_catalog_id
from spate.environment.pg_catalog_rows import rows
from spate.environment.pg_catalog_snapshot import Snapshot, build
from spate.environment.sql_catalog import EnvironmentCatalog
from spate.environment.sql_state import Session
from spate.errors import EvalError, EvaluationFailed
from spate.ids import GlobalId
from spate.plan.evaluation.relation import Multiset, evaluate
from spate.plan.relation import Get, RelationExpr
from spate.repr.arrow import arrow_rows, data_schema

if TYPE_CHECKING:
    from spate.environment.operations import EnvironmentOperations

ReadObject = Callable[[Get], list[tuple[Any, ...]]]
"""Reads one other object the plan reads (its rows at the read's time)."""


def reads_catalog(plan: RelationExpr) -> bool:
    """Whether ``plan`` reads a ``pg_catalog`` or ``information_schema`` relation."""
    return any(is_catalog_id(i) for i in plan.depends_on())


def snapshot(env: EnvironmentOperations, session: Session) -> Snapshot:
    """The catalog as the relations show it now, for ``session`` (its user and settings)."""
    catalog = EnvironmentCatalog(env)
    settings: Mapping[str, str] = {**session.settings, **session.client_settings}
    return build(list(catalog.objects()), env.runtime.catalog, settings)


def read(
    env: EnvironmentOperations, plan: RelationExpr, session: Session, now: int, other: ReadObject
) -> pa.Table:
    """The contents of ``plan`` (which reads catalog relations), evaluated here (module
    docs); ``other`` reads the objects that are not catalog relations."""
    snap = snapshot(env, session)
    inputs: dict[GlobalId, Multiset] = {}
    for node in plan.walk():
        if not isinstance(node, Get) or node.id in inputs:
            continue
        relation = by_id(node.id)
        contents: Multiset = Counter()
        for row in rows(relation, snap) if relation is not None else other(node):
            contents[row] += 1
        inputs[node.id] = contents
    try:
        counts = evaluate(plan, inputs, now)
    except EvalError as e:
        raise EvaluationFailed.of("query", e) from None
    out = [r for r, n in counts.items() for _ in range(max(n, 0))]
    return pa.Table.from_pylist(arrow_rows(plan.desc, out), schema=data_schema(plan.desc))
