"""spate: views over changing data, kept correct and fresh, with Spark doing the work."""

from __future__ import annotations

__version__ = "0.1.0"
