"""Frontier algebra: antichains, counted times, read policies and read holds."""

from __future__ import annotations

from spate.frontier.antichain import (
    TIMESTAMP_MAX,
    TIMESTAMP_MIN,
    Antichain,
    Frontier,
    Product,
    Timestamp,
    frontier,
)
from spate.frontier.mutable import ChangeBatch, MutableAntichain
from spate.frontier.read_hold import HoldChanges, ReadHold
from spate.frontier.read_policy import (
    LagWritesBy,
    Multiple,
    NoPolicy,
    ReadPolicy,
    StepBack,
    ValidFrom,
)

__all__ = [
    "TIMESTAMP_MAX",
    "TIMESTAMP_MIN",
    "Antichain",
    "ChangeBatch",
    "Frontier",
    "HoldChanges",
    "LagWritesBy",
    "Multiple",
    "MutableAntichain",
    "NoPolicy",
    "Product",
    "ReadHold",
    "ReadPolicy",
    "StepBack",
    "Timestamp",
    "ValidFrom",
    "frontier",
]
