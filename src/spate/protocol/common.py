"""Messages shared by the compute and storage protocols."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final, TypeVar

from spate.wire import wire

_P = TypeVar("_P")

PROTOCOL_VERSION: Final = 1
"""Bumped whenever a message changes shape; peers with another version are refused."""


@wire("hello")
@dataclass(frozen=True, slots=True)
class Hello:
    """First command of every connection (after authentication): a new protocol iteration.

    ``epoch`` is the controller's epoch for this replica; it strictly increases across
    reconnections. ``nonce`` is fresh and random per connection. The controller MUST send it
    exactly once, first. The replica MUST refuse a ``version`` it does not speak and an
    ``epoch`` older than one it has already accepted; a newer epoch replaces the older
    connection.
    """

    version: int
    epoch: int
    nonce: bytes


def merge_set_fields(base: _P, later: _P) -> _P:
    """``base`` with every field that is not ``None`` in ``later`` taken from ``later``.

    The merge rule of mergeable configuration commands (``UpdateConfiguration``): unset
    (``None``) fields keep their previous value.
    """
    changes = {
        f.name: getattr(later, f.name)
        for f in dataclasses.fields(later)  # type: ignore[arg-type]
        if getattr(later, f.name) is not None
    }
    return dataclasses.replace(base, **changes)  # type: ignore[type-var]


def all_unset(params: object) -> bool:
    """Every field of the dataclass ``params`` is ``None`` (a configuration that sets nothing)."""
    return all(getattr(params, f.name) is None for f in dataclasses.fields(params))  # type: ignore[arg-type]
