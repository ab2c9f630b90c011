"""Invariant checks with a clear failure policy.

``soft_assert(cond, msg)`` raises :class:`~spate.errors.InvariantViolation` when soft assertions
are strict (tests: ``SPATE_SOFT_ASSERT=raise``, set by the test suite) and otherwise logs the
message at ERROR level and counts it, so that a production process keeps serving while the bug
is visible in logs and metrics.

A frontier regression or a duplicate response *reported by a replica* is not checked with
``soft_assert``: that is a replica bug, and the controller disconnects and rehydrates the
replica without touching its own state.
"""

from __future__ import annotations

import logging
import os
from typing import Final

from spate.errors import InvariantViolation

_log: Final = logging.getLogger("spate.invariants")
_violations = 0


def strict() -> bool:
    return os.environ.get("SPATE_SOFT_ASSERT", "log") == "raise"


def soft_assert(cond: bool, msg: str) -> None:
    """Check an invariant: raise in tests, log and count in production."""
    global _violations
    if cond:
        return
    _violations += 1
    if strict():
        raise InvariantViolation(msg)
    _log.error("invariant violated: %s", msg)


def violations() -> int:
    """How many soft assertions failed in this process."""
    return _violations
