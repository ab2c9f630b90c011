"""What every sink checks before it writes the updates of an interval ``[lower, upper)``."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import SinkError as SinkError
from spate.errors import SinkFenced as SinkFenced
from spate.errors import UsageError
from spate.frontier.antichain import Frontier
from spate.repr.arrow import validate_table
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc


def check_interval(
    sink: str, desc: RelationDesc, updates: pa.Table, *, lower: Frontier, upper: Frontier
) -> pa.Table:
    """Validate a batch for ``[lower, upper)``; return it cast to ``desc``'s exact schema.

    Raises ``SinkError`` if ``lower`` is not before ``upper``, if a time is outside the
    interval, or if the batch does not fit ``desc`` (columns, types, NULLs).
    """
    if lower.is_empty() or not lower.less_equal(upper) or lower == upper:
        raise SinkError(f"sink {sink}: [{lower}, {upper}) is not a non-empty interval")
    for name in (TIME_COLUMN, DIFF_COLUMN):
        if name not in updates.column_names:
            raise SinkError(f"sink {sink}: the batch has no {name} column")
    try:
        table = validate_table(desc, updates, collection=f"sink {sink}")
    except UsageError as e:
        raise SinkError(str(e)) from None
    if table.num_rows:
        times = table.column(TIME_COLUMN)
        lo = pc.min(times).as_py()
        hi = pc.max(times).as_py()
        lo_bound = lower.as_option()
        up_bound = upper.as_option()
        assert lo_bound is not None
        if lo < lo_bound or (up_bound is not None and hi >= up_bound):
            raise SinkError(
                f"sink {sink}: batch times [{lo}, {hi}] are not within [{lower}, {upper})"
            )
    return table
