"""``spate status``: what an environment holds, read from its data directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spate.cli.app import app


@app.command()
def status(
    data_dir: Annotated[Path, typer.Argument(help="an environment's data directory")],
) -> None:
    """What an environment holds (read from its data directory; does not disturb it)."""
    from rich.console import Console

    from spate.environment.inspect import inspect_environment

    console = Console()
    for table in inspect_environment(data_dir).tables():
        console.print(table)
