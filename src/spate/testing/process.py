"""Running ``spate`` subcommands as real processes from tests.

The child runs with the same interpreter, and finds the very ``spate`` package the test imported
(a git worktree's ``src/`` or an installed copy), whatever the working directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import spate


def spate_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child ``python -m spate``: ``PYTHONPATH`` leads to this package."""
    env = dict(os.environ)
    src = str(Path(spate.__file__).resolve().parent.parent)
    parts = [src] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    if extra:
        env.update(extra)
    return env


def spate_argv(*args: str) -> list[str]:
    """``[python, -m, spate, *args]``."""
    return [sys.executable, "-m", "spate", *args]
