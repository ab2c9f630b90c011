"""Tables for replica tests: persist shards written with ``compare_and_append`` (the role the
storage controller plays in production), and the updates written, for the oracle."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from spate.clock import SystemClock
from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId, SystemIdGen
from spate.persist import Appended, PersistClient, PersistLocation, WriteHandle
from spate.persist.since import SinceHandle
from spate.repr import RelationDesc
from spate.repr.arrow import updates_to_table
from spate.repr.types import Row

Update = tuple[Row, int, int]


@dataclass
class Table:
    id: GlobalId
    shard: ShardId
    desc: RelationDesc
    writer: WriteHandle
    hold: SinceHandle
    """The controller's read hold on the shard (at 0 until :meth:`hold_at`)."""
    updates: list[Update] = field(default_factory=list)

    def hold_at(self, since: int) -> None:
        """Move the read hold (the shard's since follows once no reader is behind it)."""
        o = self.hold.opaque
        self.hold.compare_and_downgrade_since(o, o + 1, Antichain.of(since))

    @property
    def upper(self) -> int:
        u = self.writer.upper.as_option()
        assert u is not None
        return u

    def append(self, rows: Iterable[tuple[Row, int]], *, time: int | None = None) -> int:
        """Write ``(row, diff)``s at ``time`` (default: the upper); the upper becomes time+1."""
        t = self.upper if time is None else time
        ups = [(r, t, d) for r, d in rows]
        table = updates_to_table(self.desc, ups)
        result = self.writer.compare_and_append(
            table,
            expected_upper=Antichain.of(self.upper),
            new_upper=Antichain.of(t + 1),
            idempotency_token=uuid.uuid4(),
        )
        assert isinstance(result, Appended), result
        self.updates.extend(ups)
        return t

    def close(self) -> None:
        """Seal the table for good (its upper becomes ``{}``)."""
        result = self.writer.compare_and_append(
            None,
            expected_upper=Antichain.of(self.upper),
            new_upper=Antichain.empty(),
            idempotency_token=uuid.uuid4(),
        )
        assert isinstance(result, Appended), result

    def advance(self, upper: int) -> None:
        """Move the upper to ``upper`` without data."""
        result = self.writer.compare_and_append(
            None,
            expected_upper=Antichain.of(self.upper),
            new_upper=Antichain.of(upper),
            idempotency_token=uuid.uuid4(),
        )
        assert isinstance(result, Appended), result


class Tables:
    """Opens tables (shards) at a persist location."""

    def __init__(self, location: PersistLocation) -> None:
        self.location = location
        self.client = PersistClient(location, clock=SystemClock(), ids=SystemIdGen())
        self._next = 1

    @classmethod
    def embedded(cls, root: Path) -> Tables:
        return cls(PersistLocation.embedded(root))

    def create(self, desc: RelationDesc, *, id: GlobalId | None = None) -> Table:
        if id is None:
            id = GlobalId.user(self._next)
            self._next += 1
        shard = ShardId(uuid.uuid4())
        writer = self.client.open_writer(shard, desc)
        # The controller's read hold: without it the replicas' readers would let the shard's
        # since advance, and a replica rehydrating at the dataflow's as_of could not read it.
        hold = self.client.open_critical_since(shard)
        return Table(id, shard, desc, writer, hold)

    def contents(self, shard: ShardId, desc: RelationDesc, as_of: int) -> list[tuple[Row, int]]:
        """The consolidated contents of ``shard`` at ``as_of`` (a short-lived reader)."""
        reader = self.client.open_leased_reader(shard, desc)
        try:
            snap = reader.snapshot(as_of, timeout=30)
        finally:
            reader.expire()
        names = [c.name for c in desc.columns]
        cols = [snap.column(n).to_pylist() for n in names]
        diffs = snap.column("_diff").to_pylist()
        return sorted(((tuple(v), d) for *v, d in zip(*cols, diffs, strict=True)), key=repr)

    def close(self) -> None:
        self.client.close()
