"""Where the user's files make each Spark Connect plan node: the loader process only.

A Column carries its Python call site in its protobuf (``common.origin``); a relation carries
only its ``common.plan_id``. :func:`record_call_sites` has every
:class:`~pyspark.sql.connect.plan.LogicalPlan` made afterwards in this process note the first
stack frame outside pyspark and spate (``file:line``) under its plan id, so that what cannot be
maintained names the line of the DataFrame call (``.limit(5)``, ``spark.sql(...)``), not the
flow's definition. :func:`plan_ids` lists the plan ids of a serialized plan, to keep the sites
of one flow's nodes with that flow.
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any

from spate.pipelines.graph import Location

__all__ = ["plan_ids", "record_call_sites"]


def _user_frame(skip: tuple[str, ...]) -> Location | None:
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(skip) and not name.startswith("<frozen "):
            return Location(name, frame.f_lineno)
        frame = frame.f_back
    return None


def record_call_sites() -> dict[int, Location]:
    """From now on in this process, the user's line that made each plan node, by plan id (the
    map returned fills as plans are made). MUST be called only in the loader process: it
    replaces ``LogicalPlan.__init__`` process-wide."""
    import pyspark
    from pyspark.sql.connect.plan import LogicalPlan

    import spate

    skip = tuple(
        os.path.dirname(os.path.abspath(m.__file__ or "")) + os.sep for m in (pyspark, spate)
    )
    sites: dict[int, Location] = {}
    original = LogicalPlan.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        site = _user_frame(skip)
        if site is not None:
            # A node with subquery references serializes the second id as its plan_id.
            for pid in (self._root_plan_id, self._plan_id_with_rel):
                if pid is not None:
                    sites.setdefault(pid, site)

    LogicalPlan.__init__ = init  # type: ignore[method-assign]
    return sites


def plan_ids(message: Any) -> set[int]:
    """The ``plan_id`` of every ``RelationCommon`` in a Spark Connect protobuf message."""
    found: set[int] = set()
    stack = [message]
    while stack:
        m = stack.pop()
        if m.DESCRIPTOR.full_name == "spark.connect.RelationCommon" and m.HasField("plan_id"):
            found.add(m.plan_id)
        for fd, value in m.ListFields():
            if fd.type != fd.TYPE_MESSAGE:
                continue
            if fd.message_type.GetOptions().map_entry:
                if fd.message_type.fields_by_name["value"].type == fd.TYPE_MESSAGE:
                    stack.extend(value.values())
            elif hasattr(value, "ListFields"):
                stack.append(value)
            else:
                stack.extend(value)
    return found
