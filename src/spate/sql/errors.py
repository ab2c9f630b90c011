"""SQL errors: PostgreSQL's SQLSTATE, a message, and where in the text.

Every error the SQL front end raises is a :class:`SqlError` (a :class:`~spate.errors.UsageError`,
so a statement that fails changes nothing). ``position`` is the 1-based character offset in the
submitted text (like the ``P`` field of PostgreSQL's ErrorResponse); ``str(error)`` renders the
message, then the line with a caret under the offending spot::

    column "prise" does not exist
    LINE 1: SELECT prise FROM bids
                   ^
"""

from __future__ import annotations

from spate.errors import UsageError


class SqlError(UsageError, ValueError):
    """A statement that cannot be planned or run."""

    sqlstate = "XX000"

    def __init__(
        self,
        message: str,
        *,
        position: int | None = None,
        text: str | None = None,
        hint: str | None = None,
        sqlstate: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.text = text
        self.hint = hint
        self.detail = detail
        if sqlstate is not None:
            self.sqlstate = sqlstate

    def located(self, position: int | None, text: str | None) -> SqlError:
        """This error with a position and text filled in where it had none."""
        if self.position is None and position is not None:
            self.position = position
        if self.text is None:
            self.text = text
        return self

    def __str__(self) -> str:
        out = self.message
        if self.position is not None and self.text is not None:
            out += "\n" + caret(self.text, self.position)
        if self.hint:
            out += f"\nHINT: {self.hint}"
        return out


def caret(text: str, position: int) -> str:
    """``LINE n: <that line>`` and a caret under 1-based character ``position``."""
    offset = max(0, min(position - 1, len(text)))
    line_no = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    line = text[start : end if end >= 0 else len(text)]
    prefix = f"LINE {line_no}: "
    return f"{prefix}{line}\n{' ' * (len(prefix) + offset - start)}^"


class SqlSyntaxError(SqlError):
    sqlstate = "42601"


class StatementTooComplex(SqlError):
    """Nested deeper than the parser and planner take (PostgreSQL's ``54001``)."""

    sqlstate = "54001"


class UndefinedTable(SqlError, KeyError):
    sqlstate = "42P01"

    def __str__(self) -> str:
        return SqlError.__str__(self)


class UndefinedObject(SqlError, KeyError):
    sqlstate = "42704"

    def __str__(self) -> str:
        return SqlError.__str__(self)


class UndefinedColumn(SqlError, KeyError):
    sqlstate = "42703"

    def __str__(self) -> str:
        return SqlError.__str__(self)


class AmbiguousColumn(SqlError):
    sqlstate = "42702"


class DuplicateColumn(SqlError):
    sqlstate = "42701"


class DuplicateObject(SqlError):
    sqlstate = "42710"


class GroupingError(SqlError):
    sqlstate = "42803"


class DatatypeMismatch(SqlError, TypeError):
    sqlstate = "42804"


class CannotCoerce(SqlError):
    sqlstate = "42846"


class UndefinedFunction(SqlError):
    sqlstate = "42883"


class InvalidColumnReference(SqlError):
    sqlstate = "42P10"


class InvalidTextRepresentation(SqlError):
    sqlstate = "22P02"


class NumericOutOfRange(SqlError):
    sqlstate = "22003"


class InvalidDatetimeFormat(SqlError):
    sqlstate = "22007"


class DatetimeFieldOverflow(SqlError):
    sqlstate = "22008"


class StringDataRightTruncation(SqlError):
    sqlstate = "22001"


class FeatureNotSupported(SqlError):
    sqlstate = "0A000"


class WindowingError(SqlError):
    sqlstate = "42P20"


class UndefinedParameter(SqlError):
    sqlstate = "42P02"


class InvalidParameterValue(SqlError):
    sqlstate = "22023"


class DependentObjects(SqlError):
    sqlstate = "2BP01"
