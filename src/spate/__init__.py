"""spate: views over changing data, kept correct and fresh, with Spark doing the work.

``spate.Environment`` (:class:`spate.environment.api.Environment`) is the user-facing entry
point; it is imported on first use so that ``import spate`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["Environment", "__version__"]

if TYPE_CHECKING:
    from spate.environment.api import Environment


def __getattr__(name: str) -> object:
    if name == "Environment":
        from spate.environment.api import Environment

        return Environment
    raise AttributeError(f"module 'spate' has no attribute {name!r}")
