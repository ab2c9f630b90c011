"""Errors of the environment: the catalog, reads and writes, sources and sinks."""

from __future__ import annotations

from spate.errors._roots import SchemaMismatch, SpateError, UsageError


class EnvironmentClosed(SpateError, RuntimeError):
    """The environment was closed (or its background work failed)."""

    sqlstate = "57P01"


class CatalogError(UsageError):
    """A catalog change that is not allowed."""


class UnknownName(CatalogError, KeyError):
    """No object of this name in the catalog."""

    sqlstate = "42P01"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NameExists(CatalogError, ValueError):
    """An object of this name exists already."""

    sqlstate = "42P07"


class HasDependents(CatalogError, ValueError):
    """Dropping an object that others still read."""

    sqlstate = "2BP01"


class ConnectionInUse(HasDependents):
    """Dropping a connection (``CREATE CONNECTION``) that a source or sink was made with."""


class InvalidName(CatalogError, ValueError):
    """A name that is not an identifier (a letter or '_', then letters, digits or '_')."""

    sqlstate = "42602"


class InvalidObject(UsageError, ValueError):
    """A definition that does not fit the catalog (unknown inputs, schema mismatch…)."""


class InputMissing(InvalidObject):
    """A definition or read whose plan reads an object that does not exist (dropped after the
    plan was made): PostgreSQL's undefined table."""

    sqlstate = "42P01"

    def __init__(self, id: object) -> None:
        super().__init__(f"the plan reads {id}, which does not exist")
        self.id = id


class NotReadable(UsageError, ValueError):
    """No time exists at which every input of a query is readable."""

    sqlstate = "55000"


class ReadFailed(UsageError, RuntimeError):
    """The replica answered a read with an error."""

    sqlstate = "55000"


class ReadTimeout(SpateError, TimeoutError):
    """A read was not answered in time (its inputs did not reach its timestamp)."""


class QueryCanceled(SpateError):
    """A read was canceled: its caller asked (a wire client's cancel request, a closed
    connection) or its statement timeout passed. Its one-off dataflow, if it had one, is
    dropped on every replica. PostgreSQL's ``57014``."""

    sqlstate = "57014"


class InvalidReadArgument(UsageError, ValueError):
    """A read argument of the right type with a value that is not allowed."""


class CallTimeout(SpateError, TimeoutError):
    """An environment call did not finish in the time it was given (it was canceled)."""


class RowsNotFound(UsageError, ValueError):
    """A delete or update names rows the table does not hold."""


class ConstraintViolation(UsageError, ValueError):
    """A write that breaks a table's constraint; nothing of it was written. ``sqlstate`` is
    PostgreSQL's code, ``constraint`` the constraint's name, ``detail`` PostgreSQL's detail
    line (``Key (k)=(1) already exists.``); the message is PostgreSQL's."""

    sqlstate = "23000"

    def __init__(self, message: str, *, constraint: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.constraint = constraint
        self.detail = detail


class UniqueViolation(ConstraintViolation):
    """A key that a PRIMARY KEY or UNIQUE constraint holds already (or twice in one write)."""

    sqlstate = "23505"


class NotNullViolation(SchemaMismatch, ConstraintViolation):
    """A NULL in a column that is NOT NULL (or part of the primary key); also a
    :class:`SchemaMismatch` naming the collection, row and column."""

    sqlstate = "23502"

    def __init__(
        self, table: str, collection: str, row_index: int | None, column: str, row: str | None
    ) -> None:
        message = (
            f'null value in column "{column}" of relation "{table}" violates not-null constraint'
        )
        Exception.__init__(self, message)
        self.collection, self.row_index, self.column = collection, row_index, column
        self.expected, self.got = "non-null", "NULL"
        self.message = message
        self.constraint = f"{table}_{column}_not_null"
        self.detail = f"Failing row contains ({row})." if row is not None else None


class CheckViolation(ConstraintViolation):
    """A row for which a CHECK constraint's expression is false."""

    sqlstate = "23514"


class TransactionClosed(UsageError, RuntimeError):
    """A write to, or a commit of, a transaction already committed or rolled back."""

    sqlstate = "25000"


class InvalidConnection(UsageError, ValueError):
    """A source or sink connection with a value that is not allowed (a negative tick, an
    upsert sink without a key)."""


class SourceError(UsageError):
    """A source cannot run as configured (bad options, an upstream object that does not fit)."""


class SourceUnavailable(SourceError):
    """The upstream system cannot be reached or refused the request; retrying may help."""


class SinkError(UsageError):
    """A sink cannot write: a bad interval or batch, or an external system that refuses."""


class SinkFenced(SinkError):
    """Someone else advanced the sink's progress past this writer's view (another writer)."""
