"""COUNTER: one output ``counter(counter int64)`` holding 1, 2, 3, … as events arrive.

Event ``n`` (0-based) inserts the value ``n + 1``. With ``max_cardinality = m`` it also
retracts ``n + 1 - m`` once that is positive, so the collection always holds the newest ``m``
values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import numpy as np
import pyarrow as pa

from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import INT64
from spate.storage.sources.loadgen import LoadGenerator
from spate.storage.sources.source import SourceError, diff_schema

COUNTER_DESC: Final = RelationDesc.of(("counter", INT64, False))


class CounterReader(LoadGenerator):
    def __init__(
        self,
        *,
        tick_ms: int = 1000,
        per_tick: int = 1,
        max_cardinality: int | None = None,
        max_events: int | None = None,
        max_chunk: int = 100_000,
    ) -> None:
        super().__init__(
            tick_ms=tick_ms, per_tick=per_tick, max_chunk=max_chunk, max_events=max_events
        )
        if max_cardinality is not None and max_cardinality < 1:
            raise SourceError(f"COUNTER: max_cardinality must be >= 1, got {max_cardinality!r}")
        self._max_cardinality = max_cardinality

    @property
    def outputs(self) -> Mapping[str, RelationDesc]:
        return {"counter": COUNTER_DESC}

    def events(self, lower: int, upper: int) -> dict[str, pa.Table]:
        values = np.arange(lower + 1, upper + 1, dtype=np.int64)
        diffs = np.ones(len(values), dtype=np.int64)
        if self._max_cardinality is not None:
            old = values - self._max_cardinality
            old = old[old > 0]
            values = np.concatenate([values, old])
            diffs = np.concatenate([diffs, -np.ones(len(old), dtype=np.int64)])
        table = pa.Table.from_arrays(
            [pa.array(values, pa.int64()), pa.array(diffs, pa.int64())],
            schema=diff_schema(COUNTER_DESC),
        )
        assert table.column_names[-1] == DIFF_COLUMN
        return {"counter": table}
