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

from dataclasses import dataclass
from typing import Final

from spate.errors._environment import ReadFailed

FIELD_SEP: Final = "\x1f"
"""Between the fields of an error record (sqlstate, message, expression, row)."""


def error_record(sqlstate: str, message: str, expression: str, row: str) -> str:
    """One error of the error collection as its text (see the module docs)."""
    return FIELD_SEP.join((sqlstate, message, expression, row))


def record_sqlstate(record: str) -> str:
    """The SQLSTATE field of error record ``record`` (``22000`` for a record without fields)."""
    parts = record.split(FIELD_SEP)
    code = parts[0] if len(parts) == 4 else ""
    return code if is_sqlstate(code) else "22000"


def is_sqlstate(code: object) -> bool:
    """``code`` is a SQLSTATE: five digits or capital letters."""
    return isinstance(code, str) and len(code) == 5 and code.isalnum() and code.upper() == code


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a read or a dataflow failed, as a replica reports it: the message, and the SQLSTATE
    of the error raised (``None``: no error of its own, the read could not be served — not an
    index here, below the since, a build that failed —, which the reader reports as its own
    :class:`ReadFailed`). ``pg_message``: PostgreSQL's text for the error (``division by
    zero``), what a PostgreSQL client is answered (``None``: the message). Code and text
    travel as data; they are never read back from the message."""

    message: str
    sqlstate: str | None = None
    pg_message: str | None = None

    def within(self, prefix: str) -> Problem:
        """The same problem, its message after ``prefix`` (what failed because of it)."""
        return Problem(prefix + self.message, self.sqlstate, self.pg_message)

    @staticmethod
    def of_record(what: str, record: str, count: int = 1) -> Problem:
        """The problem of a read of ``what`` whose error collection holds ``record`` (``count``
        records in all): :func:`describe_error`'s message, the record's SQLSTATE and text."""
        parts = record.split(FIELD_SEP)
        text = parts[1] if len(parts) == 4 else None
        return Problem(describe_error(what, record, count), record_sqlstate(record), text)


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
    client is answered). Both are given as data by whoever raises the error (``pg_message``
    ``None``: the message itself); neither is ever read back from the message."""

    def __init__(
        self, message: str, sqlstate: str = "22000", pg_message: str | None = None
    ) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.pg_message: str = message if pg_message is None else pg_message

    @staticmethod
    def of(what: str, error: BaseException) -> EvaluationFailed:
        """The error a read of ``what`` evaluated in this process (no dataflow: a constant
        ``SELECT``, a map/filter over one collection's rows) fails with, for the evaluation
        error ``error`` (an ``EvalError``): the message a dataflow's read gives, the same
        SQLSTATE."""
        sqlstate = getattr(error, "sqlstate", None)
        code = sqlstate if is_sqlstate(sqlstate) else "22000"
        assert isinstance(code, str)
        text = getattr(error, "pg_message", None)
        pg_message = text if isinstance(text, str) else str(error)
        return EvaluationFailed(f"{what}: {error} [SQLSTATE {code}]", code, pg_message)

    @staticmethod
    def of_record(what: str, record: str, count: int = 1) -> EvaluationFailed:
        """The error a read of ``what`` fails with when its error collection holds ``record``
        (``count`` records in all)."""
        problem = Problem.of_record(what, record, count)
        return EvaluationFailed(problem.message, problem.sqlstate or "22000", problem.pg_message)


def reported(problem: Problem) -> ReadFailed:
    """The error a read fails with when a replica answers it with ``problem``: the evaluation
    error with the code the replica raised (:class:`OutOfMemory` for ``53200``), or, without a
    code, :class:`ReadFailed`."""
    if problem.sqlstate is None:
        return ReadFailed(problem.message)
    if problem.sqlstate == OUT_OF_MEMORY:
        return OutOfMemory(problem.message, problem.pg_message)
    return EvaluationFailed(problem.message, problem.sqlstate, problem.pg_message)


OUT_OF_MEMORY: Final = "53200"


class OutOfMemory(EvaluationFailed, MemoryError):
    """A read would need more memory than the cluster may use for it (a one-off read whose
    estimated rows exceed the replica's ``max_one_off_rows``: a cross join of many inputs). It
    was refused before it ran; SQLSTATE ``53200`` (out of memory), as in PostgreSQL."""

    def __init__(self, message: str, pg_message: str | None = None) -> None:
        super().__init__(message, OUT_OF_MEMORY, pg_message)
