"""``spate stop``: stop the replica processes of a data directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spate.cli.app import app, settings


@app.command()
def stop(
    data_dir: Annotated[
        Path | None, typer.Argument(help="an environment's data directory (default: settings)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait before SIGKILL")] = 10.0,
) -> None:
    """Stop the replica processes an environment started (close the environment first: an
    open environment restarts them)."""
    from spate.orchestrator.process import stop_services

    directory = settings(data_dir=data_dir).data_dir
    if not directory.is_dir():
        raise FileNotFoundError(2, "no such data directory", str(directory))
    stopped = stop_services(directory, timeout=timeout)
    for name, pid in stopped:
        typer.echo(f"stopped {name} (pid {pid})")
    if not stopped:
        typer.echo(f"no replica process of {directory} is running")
