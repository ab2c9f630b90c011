"""Data directories whose webhook sources were kept as plain tables, brought up to date at open.

Before ``TableItem.webhook``, ``CREATE SOURCE … FROM WEBHOOK`` made a table, told apart from
other tables only by its CREATE text. :func:`mark_webhook_sources` finds such tables (their
kept CREATE text is a webhook source's) and marks them in one catalog commit, so that they are
sources from then on; a catalog without any commits nothing. The data is not touched.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Final

from spate.environment.catalog import CatalogState, TableItem
from spate.sql.ddl_webhook import spec_of

if TYPE_CHECKING:
    from spate.environment.runtime import Runtime

_log: Final = logging.getLogger(__name__)


def unmarked(state: CatalogState) -> list[TableItem]:
    """The tables of ``state`` made by a webhook source's CREATE but not marked as one."""
    out = []
    for item in state:
        if isinstance(item, TableItem) and not item.webhook:
            definition = state.definition(item.id)
            if definition is not None and spec_of(definition.create_sql) is not None:
                out.append(item)
    return out


def marked(state: CatalogState) -> CatalogState:
    """``state`` with every table of :func:`unmarked` marked as a webhook source."""
    for item in unmarked(state):
        state = state.replace_item(dataclasses.replace(item, webhook=True))
    return state


def mark_webhook_sources(rt: Runtime) -> int:
    """Mark the webhook sources of an older data directory (module docs); how many."""
    found = unmarked(rt.catalog)
    if found:
        rt.commit(marked)
        names = ", ".join(i.name for i in found)
        _log.info("marked %d webhook source(s) kept as tables: %s", len(found), names)
    return len(found)
