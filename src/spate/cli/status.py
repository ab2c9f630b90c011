"""``spate status``: what an environment holds, read from its data directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spate.cli.app import app, settings


@app.command()
def status(
    data_dir: Annotated[
        Path | None, typer.Argument(help="an environment's data directory (default: settings)")
    ] = None,
) -> None:
    """What an environment holds (read from its data directory; does not disturb it)."""
    from rich.console import Console

    from spate.environment.inspect import inspect_environment

    effective = settings(data_dir=data_dir)
    console = Console()
    for table in inspect_environment(effective.data_dir, effective).tables():
        console.print(table)
