"""Compaction: size-tiered merging of batches, with times advanced to the since (consolidated).

**Policy** (pure, :func:`pick_compaction`): walk the batches from the newest; a batch joins the
run of newer batches when its size is at most ``factor ×`` their combined size. A run of two or
more is merged once it is worth a merge: it has at least ``min_inputs`` batches, or at least
``min_bytes`` of them. Sizes then grow geometrically from newest to oldest, so a shard holds
``O(min_inputs + log n)`` batches and each update is rewritten ``O(log n)`` times. The floor
exists because a merge has a fixed cost whatever its size (its output blob and a state change,
each made durable, then a GC of its inputs): without it a shard taking small appends would merge
about every other append; with ``min_inputs = 8`` it merges about every seventh.

Sizes in the walk are counts of updates, not encoded bytes (the floor ``min_bytes`` is bytes):
small parts are written uncompressed and larger ones with zstd (:mod:`spate.persist.batch`),
so bytes would weigh a fresh append about three times a merged update of the same rows, and a
middle-sized merged batch would join every run of ``min_inputs`` appends (rewritten every few
appends while it grows linearly) instead of waiting until the newer batches match it.

**Merge** (:func:`compact`): read the run's parts (verified), advance every time below the since
``s`` to ``s`` and consolidate (skipped when no time is below ``s`` and no diff is negative:
then only exact duplicates could merge; with retractions, only they and the updates that share
a probe column's value with one are grouped: :func:`_consolidate_retracted`). By the
differential-dataflow guarantee the merged batch accumulates to the same contents at every time
``>= s`` (P4), and readers never read below the since. With an empty since nobody may read
again, so the merged batch is empty. The output is written to new blobs first, then swapped in
by CaS only if the inputs are still in the state; otherwise (someone else compacted them) the
output is deleted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import LocationError
from spate.frontier.antichain import Antichain, Frontier
from spate.persist._shard import ShardContext
from spate.persist.batch import encode_part, make_part
from spate.persist.errors import BatchMissing
from spate.persist.state import BatchPart, HollowBatch, ShardState, apply_compaction
from spate.repr.consolidate import advance_times, consolidate
from spate.repr.desc import DIFF_COLUMN, RESERVED_COLUMNS, TIME_COLUMN

_log: Final = logging.getLogger("spate.persist.compact")


@dataclass(frozen=True, slots=True)
class CompactionReq:
    """Merge ``inputs`` (contiguous, oldest first) advancing times to ``since``."""

    inputs: tuple[HollowBatch, ...]
    since: Frontier


def pick_compaction(
    state: ShardState, *, factor: float, min_inputs: int = 2, min_bytes: int = 0
) -> CompactionReq | None:
    """The run of newest batches to merge now, or ``None`` (module docs)."""
    if state.tombstone:
        return None
    bs = state.batches
    if bs and bs[-1].is_empty():
        bs = bs[:-1]
    if len(bs) < 2:
        return None
    i = len(bs) - 1
    acc = bs[i].num_updates
    while i > 0 and bs[i - 1].num_updates <= factor * acc:
        acc += bs[i - 1].num_updates
        i -= 1
    if i == len(bs) - 1:
        return None
    if len(bs) - i < min_inputs and sum(b.encoded_size for b in bs[i:]) < min_bytes:
        return None  # not worth a merge yet: later appends join the run
    return CompactionReq(inputs=tuple(bs[i:]), since=state.since)


def merge_updates(tables: list[pa.Table], since: Frontier, schema: pa.Schema) -> pa.Table:
    """Concatenate, advance times to ``since`` and consolidate (empty if ``since`` is empty)."""
    if since.is_empty() or not tables:
        return schema.empty_table()
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    (s,) = since.elements
    times = table.column(TIME_COLUMN)
    if not table.num_rows:
        return table.cast(schema)
    retractions = pc.less(table.column(DIFF_COLUMN), 0)
    if pc.any(retractions).as_py():
        return _consolidate_retracted(advance_times(table, s), retractions).cast(schema)
    if pc.min(times).as_py() < s:
        return consolidate(advance_times(table, s)).cast(schema)
    # Nothing below the since and no retraction: consolidation could only add up exact
    # duplicates, rarely worth a hash group-by over every column. The batch stays correct.
    return table.cast(schema)


_SPLIT_MIN_ROWS: Final = 32_768
"""A merge of fewer updates consolidates them all: finding the ones a retraction may cancel
costs about what it saves (a run of 12,000 updates, a third of them retractions: 1.3 ms either
way); a merge of 330,000 updates, a tenth of them retractions, takes 12 ms instead of 33."""


def _probe_column(table: pa.Table) -> str | None:
    """A data column to find the updates a retraction may cancel by (integers and strings
    first: equal values hash alike), or ``None``."""
    fallback = None
    for field in table.schema:
        if field.name in RESERVED_COLUMNS:
            continue
        t = field.type
        if pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
            return str(field.name)
        if fallback is None and (
            pa.types.is_timestamp(t)
            or pa.types.is_date(t)
            or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_boolean(t)
        ):
            fallback = str(field.name)
    return fallback


def _consolidate_retracted(table: pa.Table, retractions: pa.ChunkedArray) -> pa.Table:
    """Consolidate the updates a retraction can cancel (with its times advanced): the
    retractions and the updates whose probe column holds a value some retraction holds; the
    others join the result as they are. Only equal rows consolidate, and equal rows have equal
    probe values, so every update that could meet a retraction is grouped; what is left out
    could only add up with an exact duplicate of itself, which changes no contents (as a merge
    with nothing below the since leaves it). A merge of recent appends that retract older rows
    (the usual streaming write) groups its retractions alone instead of every update."""
    probe = _probe_column(table) if table.num_rows >= _SPLIT_MIN_ROWS else None
    if probe is None:
        return consolidate(table)
    column = table.column(probe)
    values = pc.unique(column.filter(retractions))
    grouped = pc.or_(retractions, pc.is_in(column, value_set=values, skip_nulls=False))
    grouped = pc.fill_null(grouped, True)
    if pc.all(grouped).as_py():
        return consolidate(table)
    out = consolidate(table.filter(grouped))
    rest = table.filter(pc.invert(grouped)).select(out.column_names)
    return pa.concat_tables([out, rest.cast(out.schema)])


def _write_output(ctx: ShardContext, table: pa.Table, actor: str) -> tuple[BatchPart, ...]:
    parts: list[BatchPart] = []
    step = ctx.config.part_max_rows
    for offset in range(0, table.num_rows, step):
        chunk = table.slice(offset, step)
        data = encode_part(chunk, ctx.shard_id, zstd_level=ctx.config.zstd_level)
        key = ctx.new_key(actor)
        try:
            ctx.retry(f"set {key}", lambda k=key, d=data: ctx.blob.set(k, d))  # type: ignore[misc]
        except LocationError:
            ctx.delete_quietly([p.key for p in parts] + [key])
            raise
        ctx.parts.put(key, chunk)
        parts.append(make_part(key, data, chunk.num_rows))
    return tuple(parts)


def compact(ctx: ShardContext, req: CompactionReq, *, actor: str, schema: pa.Schema) -> bool:
    """Perform ``req``; ``True`` if the merged batch replaced its inputs."""
    inputs = req.inputs
    parts = [p for b in inputs for p in b.parts]
    try:
        tables = ctx.fetch_written(parts, schema)
    except BatchMissing:
        # Someone else compacted these inputs and GC deleted them: nothing to do.
        current = ctx.machine.fetch()
        keys = current.part_keys()
        if not all(p.key in keys for p in parts):
            return False
        raise
    merged = merge_updates(tables, req.since, schema)
    out_parts = _write_output(ctx, merged, actor)
    output = HollowBatch(
        lower=inputs[0].lower,
        upper=inputs[-1].upper,
        since=req.since if not req.since.is_empty() else Antichain.empty(),
        parts=out_parts,
    )
    applied = ctx.machine.apply(lambda s: apply_compaction(s, inputs, output))
    if not applied.result:
        ctx.delete_quietly([p.key for p in out_parts])
        ctx.parts.discard(p.key for p in out_parts)
        return False
    ctx.parts.discard(p.key for p in parts)
    _log.debug(
        "shard=%s compacted %d batches (%d updates) into %d updates at since %s",
        ctx.shard_id,
        len(inputs),
        sum(b.num_updates for b in inputs),
        merged.num_rows,
        req.since,
    )
    return True
