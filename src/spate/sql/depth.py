"""Deeply nested statements: parsed and planned on a deep stack, or refused with ``54001``.

sqlglot's parser and spate's planner recurse: some twenty Python frames per nested
parenthesis, a few per operator of a long chain (a 600-element ``IN`` list, 2,000 terms added
up). Under Python's default limit of 1,000 frames, 49 nested parentheses failed as an internal
error. :func:`run_deep` runs the work as usual first; work that runs out of frames runs again
on a thread of its own with a large stack (:data:`STACK_BYTES`) under a raised recursion limit
(:data:`DEEP_FRAMES`), which takes PostgreSQL's depths (5,000 nested parentheses). What is
still too deep there fails with SQLSTATE ``54001`` (statement too complex), as in PostgreSQL;
so do statements whose parentheses nest deeper than :data:`MAX_NESTING` (checked on the tokens,
before any parsing).

Python's recursion limit is one number for the whole interpreter: it is raised only while a
deep run is in progress and put back when the last one ends. Planning reads the catalog and
changes nothing, so running it again is safe.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Callable
from typing import Final, TypeVar

from spate.sql.errors import StatementTooComplex

T = TypeVar("T")

MAX_NESTING: Final = 5000
"""The deepest parentheses a statement may nest (PostgreSQL's parser takes about as many)."""
DEEP_FRAMES: Final = 250_000
"""Python's recursion limit while a deep run is in progress."""
STACK_BYTES: Final = 512 * 1024 * 1024
"""The stack of a deep run's thread (address space: pages are used only as deep as it goes)."""

_lock = threading.Lock()
_deep_runs = 0
_saved_limit = 0


def too_complex(what: str, position: int | None = None, text: str | None = None) -> Exception:
    return StatementTooComplex(
        f"statement too complex: {what}",
        position=position,
        text=text,
        hint="simplify the statement (fewer nested parentheses or subqueries, shorter lists)",
    )


def run_deep(fn: Callable[[], T]) -> T:
    """``fn()``; if it runs out of stack frames, ``fn()`` again on a deep stack; if that too
    runs out, :class:`StatementTooComplex`."""
    try:
        return fn()
    except RecursionError:
        pass
    return on_deep_stack(fn)


def on_deep_stack(fn: Callable[[], T]) -> T:
    """``fn()`` on a thread with a large stack under a raised recursion limit (the caller
    waits); :class:`StatementTooComplex` if it still runs out of frames. Only for work that
    changes nothing, or nothing before it recursed."""
    global _deep_runs, _saved_limit
    result: list[T] = []
    failure: list[BaseException] = []

    context = contextvars.copy_context()  # the caller's (spate.sql.parameters)

    def target() -> None:
        try:
            result.append(context.run(fn))
        except RecursionError:
            failure.append(too_complex("it nests deeper than the parser and planner can follow"))
        except BaseException as e:  # handed to the caller's thread
            failure.append(e)

    with _lock:
        if _deep_runs == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, DEEP_FRAMES))
        _deep_runs += 1
    try:
        with _lock:
            previous = threading.stack_size(STACK_BYTES)
            try:
                thread = threading.Thread(target=target, name="spate-sql-deep", daemon=True)
                thread.start()
            finally:
                threading.stack_size(previous)
        thread.join()
    finally:
        with _lock:
            _deep_runs -= 1
            if _deep_runs == 0:
                sys.setrecursionlimit(_saved_limit)
    if failure:
        raise failure[0]
    return result[0]
