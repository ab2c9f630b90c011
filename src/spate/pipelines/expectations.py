"""Expectations: a dataset's checks on its rows (``@dp.expect``, ``expect_or_drop``,
``expect_or_fail``), maintained with the dataset.

An expectation is a name, a Spark SQL boolean ``constraint`` over the dataset's columns and an
action. A row *passes* when the constraint is TRUE and *fails* when it is FALSE or NULL (a
filter keeps exactly the passing rows, so what ``expect_or_drop`` drops is what is counted
failed). Over the rows ``R`` the dataset's query yields at a time:

* ``warn`` (``expect``): the dataset is ``R``;
* ``drop`` (``expect_or_drop``): the dataset is the rows of ``R`` that pass every drop
  expectation;
* ``fail`` (``expect_or_fail``): while a row of ``R`` fails it, the dataset is in error (its
  reads fail naming the expectation and the row); otherwise as ``warn``.

For each expectation, ``passed`` and ``failed`` count the rows of ``R`` at that time (every
expectation sees every row of ``R``, dropped or not): a materialized view of spate
(:func:`counts_view`, ``count(*) FILTER``), maintained incrementally as ``R`` changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import sqlglot
from sqlglot import exp

from spate.pipelines.errors import DefinitionError, NotMaintainable
from spate.pipelines.expressions import ident
from spate.pipelines.graph import Action, Expectation
from spate.pipelines.relations import check_sql

__all__ = [
    "COUNTS_PREFIX",
    "Action",
    "Expectation",
    "checked_sql",
    "counts_sql",
    "counts_view",
    "validate_expectations",
]

COUNTS_PREFIX: Final = "_spate_expect_"
"""The prefix of the materialized views holding a dataset's expectation counts."""


def counts_view(dataset: str) -> str:
    """The name of the materialized view counting ``dataset``'s expectations."""
    return COUNTS_PREFIX + dataset


def _fail(e: Expectation, why: str) -> DefinitionError:
    return DefinitionError(
        f"dataset {e.dataset!r}: expectation {e.name!r} ({e.constraint!r}) at {e.location} {why}"
    )


def validate_expectations(expectations: Sequence[Expectation], columns: Sequence[str]) -> None:
    """Every constraint parses as one Spark SQL boolean expression without a subquery or an
    aggregate, and names only ``columns`` (case-insensitively, as Spark resolves them); names
    are unique per dataset. Raises :class:`DefinitionError` naming the dataset, the
    expectation and the line."""
    seen: dict[str, Expectation] = {}
    known = {c.lower() for c in columns}
    for e in expectations:
        if e.name in seen:
            raise _fail(e, f"has the name of the expectation at {seen[e.name].location}")
        seen[e.name] = e
        try:
            tree = sqlglot.parse_one(e.constraint, read="spark")
        except sqlglot.ParseError as err:
            raise _fail(e, f"does not parse: {err}") from None
        if isinstance(tree, exp.Query) or tree.find(exp.Subquery, exp.Select) is not None:
            raise _fail(e, "is not a row's condition: a subquery is not allowed")
        if tree.find(exp.AggFunc, exp.Window) is not None:
            raise _fail(e, "is not a row's condition: an aggregate is not allowed")
        try:
            check_sql(tree, e.dataset, str(e.location))  # type: ignore[arg-type]
        except NotMaintainable as err:
            raise _fail(e, f"is not deterministic: {err}") from None
        for col in tree.find_all(exp.Column):
            if col.name.lower() not in known:
                raise _fail(
                    e, f"names column {col.name!r}, which the dataset lacks; columns: "
                    f"{', '.join(columns)}"
                )  # fmt: skip


def _lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _passes(e: Expectation) -> str:
    return f"(({e.constraint}) IS TRUE)"


def checked_sql(sql: str, columns: Sequence[str], expectations: Sequence[Expectation]) -> str:
    """The dataset's query with its drop and fail expectations applied (module docs); ``sql``
    unchanged if it has none."""
    conds: list[str] = []
    for e in expectations:
        if e.action is Action.DROP:
            conds.append(_passes(e))
        elif e.action is Action.FAIL:
            message = (
                f"expectation {e.name!r} of dataset {e.dataset!r} failed: "
                f"{e.constraint} is not true"
            )
            conds.append(f"(CASE WHEN NOT {_passes(e)} THEN raise_error({_lit(message)}) "
                         f"ELSE TRUE END)")  # fmt: skip
    if not conds:
        return sql
    cols = ", ".join(ident(c) for c in columns)
    return f"SELECT {cols} FROM ({sql}) AS _checked WHERE {' AND '.join(conds)}"


def counts_sql(sql: str, expectations: Sequence[Expectation]) -> str:
    """One row per expectation: ``dataset, expectation, action, passed, failed`` over the rows
    of ``sql`` (the dataset's query before its expectations)."""
    parts = [
        f"SELECT {_lit(e.dataset)} AS dataset, {_lit(e.name)} AS expectation, "
        f"{_lit(e.action.value)} AS action, "
        f"count(*) FILTER (WHERE {_passes(e)}) AS passed, "
        f"count(*) FILTER (WHERE NOT {_passes(e)}) AS failed FROM ({sql}) AS _counted"
        for e in expectations
    ]
    return " UNION ALL ".join(parts)
