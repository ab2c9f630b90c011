"""``T``, the ``(key, time)`` pairs where a keyed operator's output can change in a step
(:mod:`spate.render.operators.keyed`), with each key's next time."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.render.layout import col_name
from spate.repr.desc import TIME_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_NEXT = "_next"
_FROM = "_from"


def with_from(times: pa.Table, lo: int) -> pa.Table:
    """``times`` (:func:`key_times`) with ``_from``: its time when in the step (``>= lo``;
    the output there is emitted), else NULL."""
    at = times.column(TIME_COLUMN)
    return times.append_column(
        _FROM, pc.if_else(pc.greater_equal(at, lo), at, pa.scalar(None, pa.int64()))
    )


def key_times(delta: pa.Table, key: tuple[int, ...], before: int | None) -> pa.Table:
    """The distinct ``(key, _time)`` pairs of ``delta`` (plus ``(key, before)`` for every key
    when given), each with ``_next``: the key's next time among them (NULL for its last).

    Key columns keep their internal names (``_g``, all zeros, for a global group). Float keys
    are normalised (``-0.0`` → ``0.0``, one NaN) so that pairs are distinct as Spark compares
    them.
    """
    names = [col_name(k) for k in key]
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for n in names:
        c = delta.column(n)
        if pa.types.is_floating(c.type):
            c = pc.if_else(pc.equal(c, 0.0), pa.scalar(0.0, c.type), c)
            c = pc.if_else(pc.is_nan(c), pa.scalar(float("nan"), c.type), c)
        columns[n] = c
    if not names:
        names = ["_g"]
        columns["_g"] = pa.array(np.zeros(delta.num_rows, dtype=np.int32))
    columns[TIME_COLUMN] = delta.column(TIME_COLUMN)
    pairs = pa.table(columns).group_by([*names, TIME_COLUMN], use_threads=False).aggregate([])
    if before is not None:
        keys_only = pairs.select(names).group_by(names, use_threads=False).aggregate([])
        stamp = pa.array(np.full(keys_only.num_rows, before, dtype=np.int64))
        pairs = pa.concat_tables([pairs, keys_only.append_column(TIME_COLUMN, stamp)])
    order = [(n, "ascending") for n in [*names, TIME_COLUMN]]
    pairs = pairs.sort_by(order)
    n = pairs.num_rows
    times = pairs.column(TIME_COLUMN).to_numpy()
    same = np.ones(max(n - 1, 0), dtype=bool)
    for name in names:
        c = pairs.column(name).combine_chunks()
        a, b = c.slice(0, n - 1), c.slice(1)
        eq = pc.fill_null(pc.equal(a, b), False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        eq = pc.or_(eq, both_null)
        if pa.types.is_floating(c.type):
            eq = pc.or_(
                eq, pc.and_(pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False))
            )
        same &= eq.to_numpy(zero_copy_only=False)
    nxt = np.zeros(n, dtype=np.int64)
    valid = np.zeros(n, dtype=bool)
    if n > 1:
        nxt[:-1] = times[1:]
        valid[:-1] = same
    return pairs.append_column(_NEXT, pa.array(nxt, pa.int64(), mask=~valid))


def null_safe(
    left: DataFrame, right: DataFrame, left_keys: list[str], right_keys: list[str]
) -> Column:
    """Every ``left_keys[i]`` equals ``right_keys[i]``, NULL equal to NULL."""
    cond = None
    for lk, rk in zip(left_keys, right_keys, strict=True):
        c = left[lk].eqNullSafe(right[rk])
        cond = c if cond is None else cond & c
    assert cond is not None
    return cond


def t_named(times: pa.Table, keys: list[str]) -> pa.Table:
    """``T`` with the names the plan joins on: keys ``_tk0…``, ``_at``, ``_next``, ``_from``
    (renamed on the driver: a Spark select would be one more operator to analyse)."""
    names = [*(f"_tk{i}" for i in range(len(keys))), "_at", _NEXT, _FROM]
    return times.select([*keys, TIME_COLUMN, _NEXT, _FROM]).rename_columns(names)
