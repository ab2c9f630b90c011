"""Automatic maintenance after a state change: compaction (writers) and GC (anyone).

Runs inline, after the change committed. A failure is logged and never turns a committed write
into an error (the next maintenance retries whatever was left).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Final

import pyarrow as pa

from spate.errors import SpateError
from spate.persist._shard import ShardContext
from spate.persist.compact import compact, pick_compaction
from spate.persist.gc import GcReport, collect_garbage, should_gc
from spate.persist.state import ShardState

_log: Final = logging.getLogger("spate.persist.maintenance")

MAX_MERGES_PER_CALL: Final = 4


def maintenance_due(ctx: ShardContext, before: ShardState, *, compacts: bool) -> bool:
    """Whether :func:`run_maintenance` after a change from ``before`` (to the cached state)
    would do anything: a compaction to pick (``compacts``: as a writer) or GC due. Cheap: a
    look at the cached state, no I/O."""
    config = ctx.config
    after = ctx.machine.cached()
    if compacts and pick_compaction(
        after,
        factor=config.compaction_factor,
        min_inputs=config.compaction_min_inputs,
        min_bytes=config.compaction_min_bytes,
    ):
        return True
    return should_gc(before, after, ctx.machine.changes_since_gc, config.gc_every)


def run_maintenance(
    ctx: ShardContext,
    before: ShardState,
    *,
    writer: str | None,
    schema: pa.Schema | None,
    gc_guard: contextlib.AbstractContextManager[object] | None = None,
) -> GcReport | None:
    """Compact (if ``writer`` and ``schema`` are given) and collect garbage when worthwhile.

    GC as ``writer`` deletes the blobs of ``writer`` that no state references, so no append of
    ``writer`` may be in flight while it runs: ``gc_guard`` (held around GC only) excludes them
    when the caller does not."""
    try:
        if writer is not None and schema is not None:
            for _ in range(MAX_MERGES_PER_CALL):
                config = ctx.config
                req = pick_compaction(
                    ctx.machine.cached(),
                    factor=config.compaction_factor,
                    min_inputs=config.compaction_min_inputs,
                    min_bytes=config.compaction_min_bytes,
                )
                if req is None or not compact(ctx, req, actor=writer, schema=schema):
                    break
        after = ctx.machine.cached()
        if should_gc(before, after, ctx.machine.changes_since_gc, ctx.config.gc_every):
            with gc_guard or contextlib.nullcontext():
                return collect_garbage(ctx, me=writer)
    except (SpateError, OSError, pa.ArrowException) as e:
        _log.warning("shard=%s maintenance failed (will retry later): %s", ctx.shard_id, e)
    return None
