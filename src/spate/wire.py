"""The registry of wire types: ``@wire("tag", version)`` on a frozen dataclass.

Kept apart from :mod:`spate.codec` and free of spate imports, so that value types
anywhere (frontier, repr, plan) can register themselves without import cycles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Registration:
    cls: type
    tag: str
    version: int


BY_TAG: dict[str, Registration] = {}
BY_CLS: dict[type, Registration] = {}


def wire(tag: str, version: int = 1) -> Callable[[type[T]], type[T]]:
    """Class decorator: make a frozen dataclass encodable under ``tag`` at ``version``.

    The fields' type annotations are the schema the decoder enforces. Bump ``version`` whenever
    the fields change; a peer with another version is refused, never misread.
    """

    def register(cls: type[T]) -> type[T]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"@wire({tag!r}) needs a dataclass, got {cls!r}")
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"@wire({tag!r}): {cls.__name__} must be frozen")
        if tag in BY_TAG and BY_TAG[tag].cls is not cls:
            raise TypeError(f"wire tag {tag!r} already used by {BY_TAG[tag].cls.__name__}")
        reg = Registration(cls, tag, version)
        BY_TAG[tag] = reg
        BY_CLS[cls] = reg
        return cls

    return register


def registered_tags() -> dict[str, type]:
    """Every registered tag and its class (for fuzzers and round-trip tests)."""
    return {t: r.cls for t, r in BY_TAG.items()}
