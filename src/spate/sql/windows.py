"""Window functions (``… OVER (PARTITION BY … ORDER BY …)``): not lowered yet."""

from __future__ import annotations

from sqlglot import exp

from spate.sql.errors import FeatureNotSupported
from spate.sql.query import QueryPlanner


def reject_windows(qp: QueryPlanner, node: exp.Select) -> None:
    window = next((n for n in node.walk() if isinstance(n, exp.Window)), node)
    raise qp.err(FeatureNotSupported, "window functions are not supported yet", window)
