"""``spate config``: the effective settings, secrets redacted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from spate.cli.app import app, settings


@app.command()
def config(
    data_dir: Annotated[Path | None, typer.Option(help="override the data directory")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of TOML")] = False,
) -> None:
    """Print the effective settings (file, SPATE_* variables, flags), secrets redacted."""
    import tomli_w

    from spate.config import redacted

    data = redacted(settings(data_dir=data_dir))
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo("# effective settings; unset ones (not shown) take their defaults")
    typer.echo(tomli_w.dumps(_without_none(data)), nl=False)


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _without_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None
    }
