"""SUBSCRIBE through ``Environment.sql``: the changes of the subscribed query with its rows
named and typed as the query's result columns.

:meth:`~spate.environment.operations.EnvironmentOperations.subscribe` names each row's fields
after the plan's columns, which for a SQL query are internal names (``col2``, ``win0``) rather
than the names the query gives them (``sum(x) AS total``); and its values are the stored ones
(``smallint``/``integer`` as int64, ``real`` as float64). A :class:`SqlSubscription` yields
the same batches with each row a named tuple of the query's column names, and knows the
result's Arrow schema with the query's PostgreSQL types (``int16``, ``int32``, ``float32``),
as a SELECT's table has it.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from spate.environment.changes import Change, Changes
from spate.repr.desc import RelationDesc
from spate.sql.results import result_schema

_FLOAT4 = struct.Struct("f")


def _float4(v: Any) -> Any:
    """``v`` as PostgreSQL's ``real`` holds it (a stored ``real`` already is)."""
    if v is None or not isinstance(v, float):
        return v
    try:
        return _FLOAT4.unpack(_FLOAT4.pack(v))[0]
    except OverflowError:  # beyond single precision: the stored value is not a real
        return v


class SqlSubscription(Iterator[Changes]):
    """The batches of a subscribe, rows renamed and typed as the SQL result's columns."""

    def __init__(
        self,
        changes: Iterator[Changes],
        desc: RelationDesc,
        names: Sequence[str],
        types: Sequence[str],
    ) -> None:
        self._changes = changes
        self.schema: pa.Schema = result_schema(desc, names, types)
        """The result's columns with the Arrow types of their PostgreSQL types."""
        self._row: Any = collections.namedtuple("Row", list(names), rename=True)  # type: ignore[misc]
        real = [i for i, t in enumerate(types[: len(names)]) if t == "float4"]
        self._convert: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None
        if real:
            self._convert = lambda row: tuple(
                _float4(v) if i in real else v for i, v in enumerate(row)
            )

    def __iter__(self) -> SqlSubscription:
        return self

    def __next__(self) -> Changes:
        batch = next(self._changes)
        make = self._row._make
        convert = self._convert
        return Changes(
            [Change(c.time, make(convert(c.row) if convert else c.row), c.diff) for c in batch],
            batch.upper,
        )

    def close(self) -> None:
        """Stop the subscribe (as closing the iterator of ``subscribe`` does)."""
        closer = getattr(self._changes, "close", None)
        if closer is not None:
            closer()
