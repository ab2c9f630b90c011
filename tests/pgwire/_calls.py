"""Recording the calls of a function the server makes (a spy), to count what a path does."""

from __future__ import annotations

from typing import Any

import pytest


def calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[tuple[Any, ...]]:
    """The arguments of every call of ``owner.name`` from now on (which still runs); the
    test may clear the list."""
    seen: list[tuple[Any, ...]] = []
    real = getattr(owner, name)

    def spy(*args: Any) -> Any:
        seen.append(args)
        return real(*args)

    monkeypatch.setattr(owner, name, spy)
    return seen
