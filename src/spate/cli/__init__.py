"""The ``spate`` command line: one typer app (``spate.cli.app``), one module per command."""

from __future__ import annotations

from spate.cli import (  # noqa: F401  (each module registers its command on the app)
    demo,
    replica,
    status,
    version,
    walkthrough,
)
from spate.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
