"""The ``spate`` typer application that every command module registers on.

A command lives in its own module of this package (``spate.cli.demo``…) and registers with
``@app.command()``; ``spate.cli`` imports each of them, so adding a command is adding a module
and one import line there. Commands read the effective settings with :func:`settings` (the
``--config`` file, ``SPATE_*`` variables, their own flags).

Global options: ``--config FILE`` (or ``SPATE_CONFIG``), ``--log-level``, ``--debug`` (errors
with their traceback; without it an error is one line on stderr and exit code 1),
``--version``.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

import spate
from spate.config import CONFIG_ENV, Settings, load_settings
from spate.persist.cli import app as persist_app

app = typer.Typer(
    name="spate",
    help="spate keeps views over changing data correct and fresh, on Apache Spark.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(persist_app, name="persist")


@dataclass
class _State:
    config: Path | None = None
    log_level: str | None = None
    debug: bool = False


state = _State()


def settings(**overrides: Any) -> Settings:
    """The effective settings: the ``--config`` file, ``SPATE_*`` variables, then
    ``overrides`` (a command's flags; ``None`` values leave a setting alone)."""
    if state.log_level is not None:
        overrides.setdefault("log_level", state.log_level)
    return load_settings(state.config, **overrides)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"spate {spate.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", envvar=CONFIG_ENV, help="settings file (TOML)", show_envvar=True),
    ] = None,
    log_level: Annotated[
        str | None, typer.Option("--log-level", help="DEBUG, INFO, WARNING, ERROR")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks of errors")] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="print the version"),
    ] = False,
) -> None:
    state.config, state.log_level, state.debug = config, log_level, debug
    # The console shows warnings unless --log-level says otherwise (the log_level setting is
    # the level spate logs at, which replicas write to their log files). A replica process
    # logs at the level its environment passes down (SPATE_LOG_LEVEL), by default INFO.
    default = "INFO" if ctx.invoked_subcommand == "replica" else "WARNING"
    level = (log_level or os.environ.get("SPATE_LOG_LEVEL") or default).upper()
    if level not in logging.getLevelNamesMapping():
        raise typer.BadParameter(f"unknown log level {level!r}", param_hint="--log-level")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


def main() -> None:
    """The ``spate`` command: errors are one line on stderr (with ``--debug``, a traceback)."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise SystemExit(130) from None
    except Exception as e:
        if state.debug:
            raise
        typer.echo(f"spate: error: {_one_line(e)}", err=True)
        raise SystemExit(1) from None


def _one_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    if isinstance(e, (FileNotFoundError, PermissionError)) and e.filename:
        text = f"{e.strerror}: {e.filename}"
    first = text.splitlines()[0]
    if len(text.splitlines()) > 1:
        first += " …"
    from pydantic import ValidationError

    if isinstance(e, ValidationError):
        errs = e.errors()
        where = ".".join(str(p) for p in errs[0]["loc"]) if errs else ""
        first = f"invalid setting {where}: {errs[0]['msg']}" if errs else first
    return first
