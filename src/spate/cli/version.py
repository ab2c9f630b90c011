"""``spate version``: print spate's version."""

from __future__ import annotations

import typer

import spate
from spate.cli.app import app


@app.command()
def version() -> None:
    """Print spate's version."""
    typer.echo(spate.__version__)
