"""The environment's durable documents (epoch, timestamp oracle, catalog): see
:mod:`spate.persist.document`."""

from __future__ import annotations

from spate.persist.document import DurableDocument

__all__ = ["DurableDocument"]
