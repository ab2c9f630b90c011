"""A stand-in renderer for unit tests of the runtime and server (no Spark).

``FakeIndex`` maintains its single input as an Arrow table and answers peeks from it. It
reads its input through the real resolver (``ReplicaInputs``: persist shards), so the runtime's
scheduling, input reading, compaction and failure paths run for real; only Spark is missing.
``FakeIndex.fail_next`` makes the next steps raise (to test failure handling).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import Problem
from spate.frontier import Antichain, Frontier
from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription
from spate.plan.finishing import RowSetFinishing
from spate.repr import INT64
from spate.repr.arrow import updates_schema
from spate.repr.consolidate import accumulate_at
from spate.repr.desc import RelationDesc
from spate.repr.types import Row

_SCHEMA = updates_schema(RelationDesc.of(("k", INT64, False), ("v", INT64, False)))


@dataclass
class FakeReport:
    sink_updates: dict[GlobalId, pa.Table] = field(default_factory=dict)
    errors: pa.Table | None = None
    actions: int = 0
    rows_in: int = 0
    rows_out: int = 0


class FakeIndex:
    fail_next: ClassVar[int] = 0
    built: ClassVar[int] = 0

    def __init__(
        self,
        description: DataflowDescription,
        resolver: Any,
        *,
        spark: Any,
        scratch: Path,
        name: str | None = None,
    ) -> None:
        (src,) = description.source_imports
        assert description.as_of is not None
        self.desc = description
        self.src = src.id
        self.resolver = resolver
        self.as_of: int = description.as_of.elements[0]
        self._upper = self.as_of
        self._since = self.as_of
        self.table: pa.Table | None = None
        since = resolver.since(src.id)
        if not since.less_equal(self.as_of):
            raise ValueError(f"as_of {self.as_of} is before the since {since} of {src.id}")
        FakeIndex.built += 1

    @property
    def upper(self) -> Frontier:
        return Antichain.of(self._upper)

    def ready_upper(self) -> Frontier:
        u: Frontier = self.resolver.upper(self.src)
        return u

    def step(self, upper: Frontier | None = None) -> FakeReport:
        if FakeIndex.fail_next > 0:
            FakeIndex.fail_next -= 1
            raise RuntimeError("injected step failure")
        target = (self.ready_upper() if upper is None else upper).elements[0]
        parts = []
        if self._upper == self.as_of:
            parts.append(_read(self.resolver.snapshot(self.src, as_of=self.as_of)))
            if target > self.as_of + 1:
                parts.append(
                    _read(self.resolver.updates(self.src, lower=self.as_of + 1, upper=target))
                )
        else:
            parts.append(_read(self.resolver.updates(self.src, lower=self._upper, upper=target)))
        delta = pa.concat_tables(parts)
        if self._upper == self.as_of:
            times = pc.max_element_wise(delta.column("_time"), pa.scalar(self.as_of, pa.int64()))
            i = delta.schema.get_field_index("_time")
            delta = delta.set_column(i, delta.schema.field(i), times)
        self.table = delta if self.table is None else pa.concat_tables([self.table, delta])
        self._upper = target
        return FakeReport({s.id: delta for s in self.desc.sink_exports})

    def peek(
        self,
        export: GlobalId,
        *,
        timestamp: int,
        finishing: RowSetFinishing | None = None,
        literal_constraints: Sequence[Row] | None = None,
        result_desc: RelationDesc | None = None,
    ) -> pa.Table:
        if timestamp < self._since:
            raise ValueError(f"{export}: read at {timestamp} below since {self._since}")
        assert self.table is not None
        return accumulate_at(self.table, timestamp, sort=True)

    def error_at(self, timestamp: int) -> Problem | None:
        return None

    def allow_compaction(self, export: GlobalId, frontier: Frontier) -> None:
        if not frontier.is_empty():
            self._since = max(self._since, frontier.elements[0])

    def arrangement(self, export: GlobalId) -> Any:
        raise NotImplementedError

    def drop(self) -> None:
        self.table = None


def _read(data: Any) -> pa.Table:
    table: pa.Table = data.table if hasattr(data, "table") else data.read()
    return table.replace_schema_metadata(None).cast(_SCHEMA)
