"""Errors of plans: bad plans fail at construction, before anything runs.

* :class:`InvalidPlan` — a relational or scalar expression that does not type-check or does not
  fit its input. The message starts with the node (``Filter: …``, ``Map: …``) and names the
  column (``column 'x' not found; columns: a, b``).
* :class:`PlanColumnMissing` — a column name that the input does not have (also a ``KeyError``).
* :class:`PlanTypeError` — operand or result types that do not fit (also a ``TypeError``).
* :class:`InvalidDataflow` — a dataflow description whose parts do not fit together
  (non-topological objects, duplicate exports, unknown ids…).
* :class:`InvalidFinishing` — an ORDER BY / LIMIT / projection that does not fit its relation.
* :class:`EvalError` — evaluating a valid plan on some data failed (int64 overflow, a negative
  multiplicity where a multiset is required).
"""

from __future__ import annotations

from spate.errors._roots import ColumnMissing, SpateError, UsageError


class InvalidPlan(UsageError, ValueError):
    """A plan node that is not well formed or not well typed for its inputs."""


class PlanTypeError(InvalidPlan, TypeError):
    """Operand, predicate or result types that do not fit."""

    sqlstate = "42804"


class PlanColumnMissing(InvalidPlan, ColumnMissing):
    """A column referenced by name or position that the input does not have."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidDataflow(UsageError, ValueError):
    """A dataflow description whose parts do not fit together, or do not fit the instance that
    is asked to run it (a collection id that exists already there)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid dataflow: {reason}")


class InvalidFinishing(UsageError, ValueError):
    """A finishing that does not fit the relation it finishes."""


class EvalError(SpateError, ArithmeticError):
    """A valid plan could not be evaluated on these data (overflow, negative multiplicity…).

    ``sqlstate`` is PostgreSQL's code for it (``22012`` division by zero, ``22003`` a value out
    of range, ``22P02`` text that does not parse, ``21000`` a scalar subquery with more than one
    row; ``22000`` otherwise). ``pg_message`` is PostgreSQL's text for it, without what spate
    adds (the expression and the row it was evaluating); ``None``: the message itself."""

    sqlstate: str = "22000"

    def __init__(
        self, message: str, *, sqlstate: str | None = None, pg_message: str | None = None
    ) -> None:
        super().__init__(message)
        if sqlstate is not None:
            self.sqlstate = sqlstate
        self.pg_message: str = message if pg_message is None else pg_message
