"""The roots of the exception hierarchy, and the errors of frontiers and the data model.

One root, :class:`SpateError`. Below it:

* :class:`UsageError` — the caller asked for something invalid (unknown id, a read below the
  since, a row of the wrong type). Never retried; the failed call changed nothing. Narrow
  subclasses mix in the matching built-in, the way ibis does: ``CollectionMissing`` is also a
  ``KeyError``, ``SchemaMismatch`` also a ``TypeError``.
* :class:`LocationError` — an external system (blob store, consensus, network) failed.
  :class:`Determinate` means the operation certainly did not happen; :class:`Indeterminate`
  means it may or may not have. Only an operation carrying an idempotency token may be retried
  after an ``Indeterminate``.
* :class:`ProtocolError` — a peer sent something that is not a valid message in this state.
* :class:`InvariantViolation` — spate's own bug, detected. See :mod:`spate.soft_assert`.

Every message names the object and the frontiers involved. Expected outcomes — a
compare-and-append that lost the race — are returned values, not errors.
"""

from __future__ import annotations


class SpateError(Exception):
    """Root of every error spate raises on purpose."""


class UsageError(SpateError):
    """The caller asked for something invalid. Nothing was changed."""


class InvariantViolation(SpateError, AssertionError):
    """An internal invariant does not hold: a bug in spate (or in a replica)."""


class LocationError(SpateError):
    """An external system failed."""


class Determinate(LocationError):
    """The operation failed and certainly had no effect. Safe to retry."""


class Indeterminate(LocationError):
    """The operation may or may not have taken effect (a timeout, a lost connection)."""


class ProtocolError(SpateError, ValueError):
    """A peer violated the wire protocol (framing, codec, stage, authentication)."""


# --- frontier algebra ------------------------------------------------------------------------


class FrontierError(UsageError, ValueError):
    """A frontier operation that would break monotonicity or counting."""


class NegativeCount(FrontierError):
    """A count of a ``MutableAntichain`` would drop below zero."""


class FrontierRegression(FrontierError):
    """A capability was requested at a time that is not beyond the current frontier."""


class ReadHoldDowngradeError(FrontierError):
    """A read hold was asked to move to a frontier below its since."""


class ReadHoldMismatch(UsageError, ValueError):
    """Two read holds of different collections or issuers were merged."""


class InvalidReadPolicy(UsageError, ValueError):
    """A read policy was built with impossible parameters."""


# --- data model ------------------------------------------------------------------------------


class ColumnMissing(UsageError, KeyError):
    """A column name that the relation does not have."""

    sqlstate = "42703"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InvalidRelationDesc(UsageError, ValueError):
    """A relation description with duplicate, empty or reserved column names."""


class SchemaMismatch(UsageError, TypeError):
    """A row (or table) does not fit its collection's relation description."""

    sqlstate = "42804"

    def __init__(
        self,
        collection: str,
        row_index: int | None,
        column: str | None,
        expected: str,
        got: str,
    ) -> None:
        self.collection = collection
        self.row_index = row_index
        self.column = column
        self.expected = expected
        self.got = got
        where = [f"collection {collection}"]
        if row_index is not None:
            where.append(f"row {row_index}")
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(f"{', '.join(where)}: expected {expected}, got {got}")


class InvalidId(UsageError, ValueError):
    """A string that does not parse as the id kind asked for."""


class InvalidArgument(UsageError, TypeError):
    """An argument of the wrong type (a dict where a ``RelationDesc`` belongs, a float where a
    number of milliseconds does); refused before anything changed."""


class InvalidArgumentValue(UsageError, ValueError):
    """An argument of the right type with a value that is not allowed (a timeout of 0 s, an
    option a source of that kind does not take); refused before anything changed."""


def check_argument(value: object, expected: type | tuple[type, ...], what: str) -> None:
    """Raise :class:`InvalidArgument` unless ``value`` is an instance of ``expected`` (``bool``
    is never accepted for ``int``)."""
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        names = " or ".join(t.__name__ for t in types)
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise InvalidArgument(f"{what} must be a {names}, got {type(value).__name__} {shown}")


class InvalidScalarType(UsageError, ValueError):
    """A type name or numeric precision/scale that spate does not support."""

    sqlstate = "42704"
