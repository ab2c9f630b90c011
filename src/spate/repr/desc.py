"""Relation descriptions: ordered, named, typed columns, and row validation.

A row is a tuple of datums, one per column. :meth:`RelationDesc.validate_rows` checks a batch of
rows *before* anything is written: the first bad row raises :class:`~spate.errors.SchemaMismatch`
naming the collection, the row index, the column, what was expected and what was given, and
the whole batch is rejected.

Column names are non-empty, unique, and never ``_time`` or ``_diff`` (those two columns are added
by the physical format, see :mod:`spate.repr.arrow`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spate.errors import ColumnMissing, InvalidRelationDesc, SchemaMismatch
from spate.repr.identity import canonical_float
from spate.repr.types import Datum, Row, ScalarKind, ScalarType
from spate.wire import wire

TIME_COLUMN = "_time"
DIFF_COLUMN = "_diff"
RESERVED_COLUMNS = frozenset({TIME_COLUMN, DIFF_COLUMN})


@wire("repr.column")
@dataclass(frozen=True, slots=True)
class Column:
    """One column: name, scalar type, and whether NULL is allowed."""

    name: str
    type: ScalarType
    nullable: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidRelationDesc(f"column names must be non-empty strings, got {self.name!r}")
        if not isinstance(self.type, ScalarType):
            raise InvalidRelationDesc(f"column {self.name!r}: not a ScalarType: {self.type!r}")
        if not isinstance(self.nullable, bool):
            raise InvalidRelationDesc(
                f"column {self.name!r}: nullable must be True or False, got {self.nullable!r}"
            )

    def __str__(self) -> str:
        return f"{self.name} {self.type}{'' if self.nullable else ' not null'}"


@wire("repr.relation_desc")
@dataclass(frozen=True, slots=True, init=False)
class RelationDesc:
    """The schema of a collection: an ordered tuple of columns."""

    columns: tuple[Column, ...]

    def __init__(self, columns: Iterable[Column]) -> None:
        cols = tuple(columns)
        seen: set[str] = set()
        for c in cols:
            if not isinstance(c, Column):
                raise InvalidRelationDesc(f"not a Column: {c!r}")
            if not isinstance(c.name, str) or not c.name:
                raise InvalidRelationDesc(f"column names must be non-empty strings, got {c.name!r}")
            if c.name in RESERVED_COLUMNS:
                raise InvalidRelationDesc(
                    f"column name {c.name!r} is reserved for the physical format"
                )
            if c.name in seen:
                raise InvalidRelationDesc(f"duplicate column name {c.name!r}")
            if not isinstance(c.type, ScalarType):
                raise InvalidRelationDesc(f"column {c.name!r}: not a ScalarType: {c.type!r}")
            seen.add(c.name)
        object.__setattr__(self, "columns", cols)

    @staticmethod
    def of(*columns: tuple[str, ScalarType] | tuple[str, ScalarType, bool]) -> RelationDesc:
        """Shorthand: ``RelationDesc.of(("id", INT64, False), ("name", TEXT))``."""
        return RelationDesc(Column(*c) for c in columns)

    @property
    def arity(self) -> int:
        return len(self.columns)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def types(self) -> tuple[ScalarType, ...]:
        return tuple(c.type for c in self.columns)

    def index_of(self, name: str) -> int:
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        raise ColumnMissing(f"column {name!r} not found; columns: {', '.join(self.names)}")

    def column(self, name: str) -> Column:
        return self.columns[self.index_of(name)]

    def __str__(self) -> str:
        return "(" + ", ".join(str(c) for c in self.columns) + ")"

    # -- validation -----------------------------------------------------------------------------

    def validate_row(self, row: Sequence[Datum], *, collection: str, row_index: int = 0) -> None:
        """Raise ``SchemaMismatch`` unless ``row`` fits this description."""
        if not isinstance(row, (tuple, list)):
            raise SchemaMismatch(
                collection,
                row_index,
                None,
                f"a tuple of {self.arity} values ({', '.join(self.names)})",
                f"{type(row).__name__}",
            )
        if len(row) != len(self.columns):
            raise SchemaMismatch(
                collection,
                row_index,
                None,
                f"{self.arity} values ({', '.join(self.names)})",
                f"{len(row)} values",
            )
        for col, value in zip(self.columns, row, strict=True):
            if value is None:
                if not col.nullable:
                    raise SchemaMismatch(
                        collection, row_index, col.name, f"non-null {col.type}", "NULL"
                    )
                continue
            problem = col.type.problem(value)
            if problem is not None:
                raise SchemaMismatch(collection, row_index, col.name, str(col.type), problem)

    def validate_rows(self, rows: Iterable[Sequence[Datum]], *, collection: str) -> list[Row]:
        """Validate every row; return them as tuples, each value in its one canonical form
        (see :mod:`spate.repr.identity`). The first bad row raises."""
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
            raise SchemaMismatch(collection, None, None, "a list of rows", f"{type(rows).__name__}")
        floats = [i for i, c in enumerate(self.columns) if c.type.kind is ScalarKind.FLOAT64]
        out: list[Row] = []
        for i, row in enumerate(rows):
            self.validate_row(row, collection=collection, row_index=i)
            values = tuple(row)
            if floats:
                fixed = list(values)
                for j in floats:
                    v = fixed[j]
                    if v is not None:
                        assert isinstance(v, (int, float))
                        fixed[j] = canonical_float(float(v))
                values = tuple(fixed)
            out.append(values)
        return out

    def project(self, names: Sequence[str]) -> RelationDesc:
        return RelationDesc(self.column(n) for n in names)
