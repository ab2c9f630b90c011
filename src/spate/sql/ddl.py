"""CREATE SOURCE, SINK, SECRET and CONNECTION."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.sql import statements as st

if TYPE_CHECKING:
    from spate.sql.plan import _Planner


def plan_create_external(p: _Planner) -> st.Statement:
    raise p.unsupported(f"CREATE {p.cur.word()} is not supported yet")
