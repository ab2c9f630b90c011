"""The ``spate`` typer application that every command module registers on.

A command lives in its own module of this package (``spate.cli.demo``…) and registers with
``@app.command()``; ``spate.cli`` imports each of them, so adding a command is adding a module
and one import line there.
"""

from __future__ import annotations

import typer

from spate.persist.cli import app as persist_app

app = typer.Typer(
    name="spate",
    help="spate keeps views over changing data correct and fresh, on Apache Spark.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(persist_app, name="persist")
