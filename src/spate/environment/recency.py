"""Real-time recency: a read that waits until its sources have ingested everything their
upstream systems had committed when the read began.

For each source a read depends on (through its subsources, views included), the upstream
position is taken when the read starts:

* PostgreSQL: the server's current WAL position (``pg_current_wal_lsn()``), compared with the
  LSN the source has committed;
* a directory of files: how many matching files are present, compared with how many the source
  has ingested (files are ingested in name order and never removed, so a file that appears
  meanwhile with a smaller name can satisfy the count instead of an older one);
* a load generator: it has no upstream; nothing to wait for.

The source's committed position comes from its statistics (reported about once a second). Once
every source has caught up, the read timestamp is advanced to the present, so the read that
follows observes what was ingested. A source that does not catch up within the read's timeout
raises :class:`~spate.errors.ReadTimeout` naming it and both positions.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

from spate.environment.catalog import SourceItem, SubsourceItem
from spate.environment.planning import inline_views, storage_inputs
from spate.environment.runtime import Runtime
from spate.environment.tables import advance_tables
from spate.errors import ReadTimeout
from spate.ids import GlobalId
from spate.plan.relation import RelationExpr
from spate.protocol.storage_desc import FileSource, PostgresSource, SourceConnection

_POLL_S: Final = 0.1


def _lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def upstream_position(connection: SourceConnection) -> int | None:
    """Where the upstream system is now (``None``: no upstream to wait for). Blocks."""
    if isinstance(connection, FileSource):
        from spate.storage.sources.files import visible_files

        return len(visible_files(Path(connection.directory), connection.pattern))
    if isinstance(connection, PostgresSource):
        from spate.storage.sources.postgres.catalog import connect

        with connect(connection.connection.reveal()) as conn:
            row = conn.execute("select pg_current_wal_lsn()::text").fetchone()
        return None if row is None else _lsn(str(row[0]))
    return None


def _committed(rt: Runtime, source: GlobalId) -> int | None:
    offsets = [
        s.offset_committed
        for s in rt.storage.statistics.source(source)
        if s.offset_committed is not None
    ]
    return max(offsets) if offsets else None


async def await_recency(rt: Runtime, plan: RelationExpr, timeout: float) -> None:
    """Wait until every source ``plan`` reads has ingested what its upstream had committed
    now; then advance the read timestamp to the present."""
    sources: dict[GlobalId, SourceItem] = {}
    for id in storage_inputs(inline_views(plan, rt.catalog)):
        item = rt.catalog.find_id(id)
        if isinstance(item, SubsourceItem):
            source = rt.catalog.by_id(item.source)
            assert isinstance(source, SourceItem)
            sources[source.id] = source
    if not sources:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    secrets = rt.layout.secrets()
    for source in sources.values():
        connection = secrets.resolve(source.connection)
        target = await asyncio.to_thread(upstream_position, connection)
        if target is None:
            continue
        while (done := _committed(rt, source.id)) is None or done < target:
            if loop.time() >= deadline:
                raise ReadTimeout(
                    f"real-time recency: source {source.name} has ingested up to {done}, not "
                    f"yet {target} (where its upstream was when the read began), after "
                    f"{timeout:.0f} s"
                )
            await asyncio.sleep(_POLL_S)
    await advance_tables(rt)
