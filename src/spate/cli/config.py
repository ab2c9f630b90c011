"""``spate config``: the effective settings, defaults included, secrets redacted.

Where a fresh environment keeps its data when no store is named (``persist.blob``,
``persist.consensus``, ``secrets_dir``) is printed as the path under the data directory that
it then uses; settings that stay unset (no metrics port, no TLS files…) are listed as comments,
so that every setting shows."""

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
    """Print every effective setting (file, SPATE_* variables, flags, defaults), secrets
    redacted."""
    import tomli_w

    from spate.config import redacted

    data = _embedded_defaults(redacted(settings(data_dir=data_dir)))
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo("# the effective settings (file, SPATE_* variables, flags, defaults)")
    unset = sorted(_unset(data))
    if unset:
        typer.echo("# unset: " + ", ".join(unset))
    typer.echo(tomli_w.dumps(_without_none(data)), nl=False)


def _embedded_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the embedded stores a fresh environment uses when none is named
    (:mod:`spate.environment.layout`): blobs, consensus and secrets under the data directory."""
    root = Path(str(data["data_dir"])).expanduser().resolve()
    persist = dict(data.get("persist") or {})
    if persist.get("blob") is None:
        persist["blob"] = (root / "blob").as_uri()
    if persist.get("consensus") is None:
        persist["consensus"] = "sqlite://" + (root / "consensus.db").as_posix()
    out = {**data, "persist": persist}
    if out.get("secrets_dir") is None:
        out["secrets_dir"] = str(root / "secrets")
    return out


def _unset(data: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in data.items():
        if isinstance(v, dict):
            out += _unset(v, f"{prefix}{k}.")
        elif v is None:
            out.append(prefix + k)
    return out


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _without_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None
    }
