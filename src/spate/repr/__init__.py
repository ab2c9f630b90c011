"""The data model: scalar types, relation descriptions, and the Arrow/Spark physical format."""

from __future__ import annotations

from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, Column, RelationDesc
from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    JSONB,
    TEXT,
    TIMESTAMP,
    Datum,
    Row,
    ScalarKind,
    ScalarType,
    numeric,
)

__all__ = [
    "BOOL",
    "BYTES",
    "DATE",
    "DIFF_COLUMN",
    "FLOAT64",
    "INT64",
    "JSONB",
    "TEXT",
    "TIMESTAMP",
    "TIME_COLUMN",
    "Column",
    "Datum",
    "RelationDesc",
    "Row",
    "ScalarKind",
    "ScalarType",
    "numeric",
]
