"""SQL against an :class:`~spate.environment.api.Environment` in end-to-end tests: the rows of a
statement, and waiting until a query answers what a test expects."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from spate.environment.api import Environment


def sql_rows(env: Environment, text: str) -> list[dict[str, Any]]:
    result = env.sql(text)
    assert isinstance(result, pa.Table)
    return result.to_pylist()


def wait_rows(
    env: Environment, query: str, want: object, what: str, timeout: float, every: float = 0.5
) -> None:
    """Until ``query`` answers ``want`` (or fail after ``timeout`` s, naming ``what``)."""
    deadline = time.monotonic() + timeout
    got: object = None
    while time.monotonic() < deadline:
        got = sql_rows(env, query)
        if got == want:
            return
        time.sleep(every)
    raise AssertionError(f"{what}: got {got!r}, want {want!r}")
