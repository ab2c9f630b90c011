"""What one step's join input deltas touched, as the keyed operator above the join sees it
(:mod:`spate.render.operators.join_history`)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from spate.render.batch import Batch
from spate.render.layout import col_name
from spate.repr.desc import TIME_COLUMN


@dataclass(frozen=True)
class Touched:
    """One step's join input deltas, seen by the keyed operator above the join."""

    deltas: tuple[Batch, ...]
    columns: tuple[int, ...]
    """Each input's column of the key's class."""
    has_history: bool
    """Every input had updates before the step (else the old join is empty)."""

    def keys(self, type: pa.DataType) -> pa.Array:
        """The distinct key values of the deltas (as ``type``)."""
        return pc.unique(self.pairs("k", type).column("k"))

    def pairs(self, name: str, type: pa.DataType) -> pa.Table:
        """The ``(key, _time)`` of every delta row with a key (as ``name``, ``type``).

        A join row's time is the latest of its parts' times, and its key the value they
        matched on, so every ``(key, time)`` where the join changes is among these (the part
        with the latest time is a delta row at that time). Not every key at every time: a
        step over many times would multiply them."""
        tables = []
        for d, c in zip(self.deltas, self.columns, strict=True):
            if d.is_empty:
                continue
            t = d.arrow()
            key = t.column(col_name(c)).cast(type)
            tables.append(pa.table({name: key, TIME_COLUMN: t.column(TIME_COLUMN)}))
        if not tables:
            return pa.table({name: pa.array([], type), TIME_COLUMN: pa.array([], pa.int64())})
        pairs = pa.concat_tables(tables)
        return pairs.filter(pc.is_valid(pairs.column(name)))

    def unsigned(self) -> bool:
        """No delta has a negative diff (so neither has the join of them)."""
        for d in self.deltas:
            if d.is_empty:
                continue
            low = d.min_diff()
            if low is None or low < 0:
                return False
        return True
