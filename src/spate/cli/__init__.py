"""The ``spate`` command line: one typer app (``spate.cli.app``), one module per command."""

from __future__ import annotations

from spate.cli import (  # noqa: F401  (each module registers its command on the app)
    config,
    demo,
    pipeline,
    replica,
    serve,
    sql,
    status,
    stop,
    version,
    walkthrough,
)
from spate.cli.app import app, main

__all__ = ["app", "main"]
