"""``dp.expect``, ``dp.expect_or_drop``, ``dp.expect_or_fail`` and their ``expect_all*`` forms,
put on ``pyspark.pipelines`` in the loader process when pyspark lacks them (pyspark 4.1 has
none; Databricks' runtime has them, with these signatures).

Each is a decorator that stacks with ``@dp.materialized_view``, ``@dp.table`` and
``@dp.temporary_view`` in either order: below the dataset decorator it marks the query function
(the registry takes the marks when the flow registers); above it, it receives what the dataset
decorator returned (``None``) and applies to the dataset registered just before
(:attr:`SpateGraphElementRegistry.last_target`). It returns a :class:`DefinedDataset` then, so
that several can stack.

This module runs only in the loader process (:mod:`spate.pipelines._loader_main`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, cast

from spate.pipelines.errors import DefinitionError
from spate.pipelines.graph import Action, Expectation, Graph, Location

__all__ = ["MARKS", "DefinedDataset", "install"]

MARKS: Final = "__spate_expectations__"
"""The attribute of a query function holding the expectations declared below its dataset
decorator: a list of ``(name, constraint, action, location)``."""

Mark = tuple[str, str, Action, Location]


class _Registry(Protocol):
    """What an expectation above its dataset decorator needs of the active registry
    (:class:`~spate.pipelines.registry.SpateGraphElementRegistry`, which imports this module)."""

    last_target: str | None
    graph: Graph


@dataclass(frozen=True, slots=True)
class DefinedDataset:
    """What an expectation decorator above a dataset decorator returns: the dataset."""

    dataset: str


def _caller() -> Location:
    frame = sys._getframe(2)  # the user's line: _caller <- dp.expect* <- the user's call
    return Location(frame.f_code.co_filename, frame.f_lineno)


def _decorator(
    what: str, action: Action, items: Mapping[str, str], where: Location
) -> Callable[[Any], Any]:
    for name, constraint in items.items():
        if not isinstance(name, str) or not name:
            raise DefinitionError(f"{what} at {where}: the name must be a non-empty string, "
                                  f"got {name!r}")  # fmt: skip
        if not isinstance(constraint, str) or not constraint.strip():
            raise DefinitionError(
                f"{what} at {where}: the constraint of expectation {name!r} must be a Spark "
                f"SQL boolean expression (a non-empty string), got {constraint!r}"
            )
    marks: list[Mark] = [(n, c, action, where) for n, c in items.items()]

    def apply(target: Any) -> Any:
        from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry

        if callable(target):  # below the dataset decorator: the query function
            setattr(target, MARKS, [*getattr(target, MARKS, []), *marks])
            return target
        registry = cast(_Registry, get_active_graph_element_registry())
        if isinstance(target, DefinedDataset):
            dataset = target.dataset
        elif target is None and registry.last_target is not None:
            dataset = registry.last_target
        else:
            raise DefinitionError(
                f"{what} at {where} must decorate a query function or a dataset decorator "
                f"(@dp.materialized_view, @dp.table, @dp.temporary_view), not {target!r}"
            )
        registry.last_target = None
        for name, constraint, act, loc in marks:
            registry.graph.add_expectation(Expectation(dataset, name, constraint, act, loc))
        return DefinedDataset(dataset)

    return apply


def _one(what: str, action: Action) -> Callable[[str, str], Callable[[Any], Any]]:
    def expect(name: str, constraint: str) -> Callable[[Any], Any]:
        return _decorator(what, action, {name: constraint}, _caller())

    expect.__name__ = what
    expect.__doc__ = f"``@dp.{what}(name, constraint)``: {action.value} on violation."
    return expect


def _all(what: str, action: Action) -> Callable[[Mapping[str, str]], Callable[[Any], Any]]:
    def expect_all(expectations: Mapping[str, str]) -> Callable[[Any], Any]:
        where = _caller()
        if not isinstance(expectations, Mapping) or not expectations:
            raise DefinitionError(f"{what} at {where} takes a non-empty dict of name: "
                                  f"constraint, got {expectations!r}")  # fmt: skip
        return _decorator(what, action, dict(expectations), where)

    expect_all.__name__ = what
    expect_all.__doc__ = f"``@dp.{what}({{name: constraint}})``: {action.value} on violation."
    return expect_all


def install() -> None:
    """Put the decorators on ``pyspark.pipelines`` where pyspark does not have them."""
    import pyspark.pipelines as dp

    api: dict[str, Callable[..., Any]] = {
        "expect": _one("expect", Action.WARN),
        "expect_or_drop": _one("expect_or_drop", Action.DROP),
        "expect_or_fail": _one("expect_or_fail", Action.FAIL),
        "expect_all": _all("expect_all", Action.WARN),
        "expect_all_or_drop": _all("expect_all_or_drop", Action.DROP),
        "expect_all_or_fail": _all("expect_all_or_fail", Action.FAIL),
    }
    for name, func in api.items():
        if not hasattr(dp, name):
            setattr(dp, name, func)
