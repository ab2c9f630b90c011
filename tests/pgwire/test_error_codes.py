"""Every error spate raises reaches a wire client with a SQLSTATE its class carries as data
(``sqlstate``) or its kind gives; none is derived from a class's name, so renaming a class
keeps its code, and no new error class silently becomes an internal error (XX000)."""

from __future__ import annotations

import importlib
import pkgutil
import re

import spate
from spate.errors import CollectionMissing, ColumnMissing, SpateError, UnknownName
from spate.pgwire.errors import class_sqlstate, sqlstate_of

INTERNAL = {
    "spate.cli.remote.ServerError",  # a server's answer to the shell: its code in each instance
    "spate.environment.catalog_store.EnvironmentFenced",
    "spate.errors._roots.InvariantViolation",
    "spate.persist.errors.BatchMissing",
    "spate.persist.errors.BatchNotFromThisShard",
    "spate.persist.errors.CorruptBatch",
    "spate.persist.errors.Fenced",
    "spate.persist.errors.LeaseExpired",
    "spate.persist.errors.ListenCompactedPast",
    "spate.persist.state_codec.CorruptState",
    "spate.pgwire.errors.PgError",  # carries its code in each instance
    "spate.render.dataflow.DataflowError",
    "spate.sql.errors.SqlError",  # carries its code in each instance; subclasses their own
    "spate.storage.controller.errors.ControllerFenced",
}
"""The error classes that are internal errors (XX000) when they reach a client: spate's own
bugs, corruption, a process fenced out by another."""


def _all_error_classes() -> list[type[SpateError]]:
    for m in pkgutil.walk_packages(spate.__path__, "spate."):
        if not m.name.endswith("__main__"):
            importlib.import_module(m.name)
    seen: set[type[SpateError]] = set()
    todo = [SpateError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen and sub.__module__.startswith("spate."):
                seen.add(sub)
                todo.append(sub)
    return sorted(seen, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_every_error_class_has_a_valid_sqlstate() -> None:
    internal = []
    for cls in _all_error_classes():
        code = class_sqlstate(cls)
        assert re.fullmatch(r"[0-9A-Z]{5}", code), (cls, code)
        if code == "XX000":
            internal.append(f"{cls.__module__}.{cls.__qualname__}")
    assert set(internal) == INTERNAL


def test_a_renamed_class_keeps_its_code() -> None:
    for base, code in (
        (UnknownName, "42P01"),
        (CollectionMissing, "42P01"),
        (ColumnMissing, "42703"),
    ):
        renamed = type("SomethingElse", (base,), {})
        assert class_sqlstate(renamed) == code
        assert sqlstate_of(renamed("x")) == code
