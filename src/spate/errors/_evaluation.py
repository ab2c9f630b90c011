"""Evaluation errors as data: the record a dataflow's error collection holds, and the error a
read of a collection in error raises.

A dataflow keeps, beside each collection it computes, an error collection: one record per input
row (or group) whose evaluation failed, with that row's time and multiplicity, so that retracting
the row retracts the error. A record is one text, :func:`error_record`'s fields joined by
:data:`FIELD_SEP`; reads that find records at their time fail with :class:`EvaluationFailed`
(a :class:`ReadFailed`) built from the first one, whose message names the collection, what went
wrong (PostgreSQL's text and SQLSTATE), the expression and a sample offending row.
"""

from __future__ import annotations

import re
from typing import Final

from spate.errors._environment import ReadFailed

FIELD_SEP: Final = "\x1f"
"""Between the fields of an error record (sqlstate, message, expression, row)."""

_SQLSTATE: Final = re.compile(r"\[SQLSTATE ([0-9A-Z]{5})\]")
_DESCRIBED: Final = re.compile(r"^(?:[^:]*): (.*?) \[SQLSTATE [0-9A-Z]{5}\]", re.S)
"""A message of :func:`describe_error` (or :meth:`EvaluationFailed.of`): what, then
PostgreSQL's text, then the SQLSTATE."""
_WHERE: Final = " evaluating "


def error_record(sqlstate: str, message: str, expression: str, row: str) -> str:
    """One error of the error collection as its text (see the module docs)."""
    return FIELD_SEP.join((sqlstate, message, expression, row))


def describe_error(what: str, record: str, count: int = 1) -> str:
    """The message a read of ``what`` fails with when its error collection holds ``record``
    (``count`` records in all)."""
    parts = record.split(FIELD_SEP)
    if len(parts) != 4:
        return f"{what}: evaluation error: {record}"
    sqlstate, message, expression, row = parts
    more = f" ({count} errors in all)" if count > 1 else ""
    return f"{what}: {message} [SQLSTATE {sqlstate}] evaluating {expression} on row {row}{more}"


class EvaluationFailed(ReadFailed):
    """The collection read holds an evaluation error at the read's time (division by zero, an
    out-of-range value, text that does not parse as the type cast to, a scalar subquery with
    more than one row). The read succeeds again once the offending input is retracted.

    ``sqlstate`` is PostgreSQL's code for the error (``22012``, ``22003``, ``22P02``,
    ``21000``…); ``pg_message`` is PostgreSQL's text for it (``division by zero``), without
    the collection, the expression and the row that the message names (what a PostgreSQL
    client is answered)."""

    def __init__(self, message: str, sqlstate: str = "22000") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        found = _DESCRIBED.match(message)
        bare = found.group(1) if found is not None else message
        self.pg_message: str = bare.split(_WHERE, 1)[0] or message

    @staticmethod
    def of(what: str, error: BaseException) -> EvaluationFailed:
        """The error a read of ``what`` evaluated in this process (no dataflow: a constant
        ``SELECT``, a map/filter over one collection's rows) fails with, for the evaluation
        error ``error`` (an ``EvalError``): the message a dataflow's read gives, the same
        SQLSTATE."""
        sqlstate = getattr(error, "sqlstate", None)
        code = sqlstate if isinstance(sqlstate, str) and len(sqlstate) == 5 else "22000"
        return EvaluationFailed(f"{what}: {error} [SQLSTATE {code}]", code)

    @staticmethod
    def from_message(message: str) -> EvaluationFailed | None:
        """The error a replica's read error text describes, if it is an evaluation error."""
        found = _SQLSTATE.search(message)
        if found is None:
            return None
        if found.group(1) == OUT_OF_MEMORY:
            return OutOfMemory(message)
        return EvaluationFailed(message, found.group(1))


OUT_OF_MEMORY: Final = "53200"


class OutOfMemory(EvaluationFailed, MemoryError):
    """A read would need more memory than the cluster may use for it (a one-off read whose
    estimated rows exceed the replica's ``max_one_off_rows``: a cross join of many inputs). It
    was refused before it ran; SQLSTATE ``53200`` (out of memory), as in PostgreSQL."""

    def __init__(self, message: str) -> None:
        super().__init__(message, OUT_OF_MEMORY)
