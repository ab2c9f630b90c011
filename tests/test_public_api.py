"""The public face: what ``spate``, ``spate.sources``, ``spate.sinks`` and ``spate.errors`` offer,
and that every public ``Environment`` method documents itself with an example."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import spate
import spate.errors
import spate.sinks
import spate.sources

SRC = Path(spate.__file__).resolve().parent


def test_every_name_spate_exports_resolves() -> None:
    for module in (spate, spate.sources, spate.sinks, spate.errors):
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"
    assert "Environment" in dir(spate)


def test_every_public_environment_method_has_an_example() -> None:
    members = {
        name: member
        for cls in reversed(spate.Environment.__mro__)
        if cls.__module__.startswith("spate.")
        for name, member in vars(cls).items()
    }
    assert {"open", "close", "insert", "select", "sql"} <= members.keys()
    missing = [
        name
        for name, member in members.items()
        if not name.startswith("_")
        and callable(
            getattr(member, "__func__", member) if not isinstance(member, property) else member.fget
        )
        and "Example::" not in (inspect.getdoc(getattr(spate.Environment, name)) or "")
    ]
    assert missing == [], f"methods without an example in their docstring: {missing}"


def test_every_error_in_spate_errors_is_defined_once() -> None:
    """No module of the package defines a class of the same name as an error of spate.errors
    (modules may re-export them)."""
    errors = {
        name
        for name in spate.errors.__all__
        if isinstance(getattr(spate.errors, name), type)
        and issubclass(getattr(spate.errors, name), BaseException)
    }
    assert {"ReadBeforeSince", "InstanceMissing", "ReplicaExists", "SpateError"} <= errors
    twins = []
    for path in SRC.rglob("*.py"):
        if path.parent.name == "errors" and path.parent.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name in errors:
                twins.append(f"{path.relative_to(SRC)}: {node.name}")
    assert twins == []


def test_errors_mix_in_the_builtin_they_resemble() -> None:
    assert issubclass(spate.errors.InstanceMissing, KeyError)
    assert issubclass(spate.errors.ReadBeforeSince, spate.errors.UsageError)
    assert issubclass(spate.errors.ReadBeforeSince, ValueError)
    e = spate.errors.ReadBeforeSince("bids", since="{20}", timestamp=15)
    assert str(e) == "read of bids at 15 is before its since {20}" and e.timestamp == 15


def test_isolation_is_a_closed_set_of_names() -> None:
    from typing import get_args

    assert set(get_args(spate.Isolation)) == {"strict serializable", "serializable"}
    assert inspect.signature(spate.Environment.select).parameters["isolation"].annotation == (
        "Isolation"
    )


def test_writes_answer_one_result_type() -> None:
    for name in ("insert", "update", "delete"):
        assert inspect.signature(getattr(spate.Environment, name)).return_annotation == (
            "WriteResult"
        ), name
