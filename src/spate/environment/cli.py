"""The ``spate`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import spate
from spate.persist.cli import app as persist_app

app = typer.Typer(
    name="spate",
    help="spate keeps views over changing data correct and fresh, on Apache Spark.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(persist_app, name="persist")


@app.command()
def demo(
    duration: Annotated[float, typer.Option(help="seconds of live view")] = 60.0,
    data_dir: Annotated[
        Path | None, typer.Option(help="keep the data here (default: a temporary directory)")
    ] = None,
    rate: Annotated[int, typer.Option(help="auction events per second")] = 200,
    kill: Annotated[bool, typer.Option(help="kill a replica halfway")] = True,
) -> None:
    """The main job: a live auction view, on embedded defaults (SQLite, files, local Spark)."""
    from spate.environment.demo import run_demo

    report = run_demo(data_dir, duration_s=duration, rate=rate, kill=kill)
    if report.matches_recomputation is False:
        raise typer.Exit(1)


@app.command()
def walkthrough() -> None:
    """Frontiers, read policies and read holds deciding a since, on a worked example."""
    from spate.environment.walkthrough import run_demo

    run_demo()


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


@app.command()
def replica(
    role: Annotated[str, typer.Option(help="storage or compute")],
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on (0: any free port)")] = 0,
    blob_uri: Annotated[
        str, typer.Option("--blob-uri", "--persist-blob", help="persist blob store URI")
    ] = "",
    consensus_uri: Annotated[
        str, typer.Option("--consensus-uri", "--persist-consensus", help="persist consensus URI")
    ] = "",
    secret_file: Annotated[
        Path | None, typer.Option(help="file holding the transport secret")
    ] = None,
    secrets_dir: Annotated[
        Path | None,
        typer.Option(help="storage: directory of the connections' secrets (one file per id)"),
    ] = None,
    replica_id: Annotated[str | None, typer.Option(help="this replica's id (r1…)")] = None,
    spark_master: Annotated[
        str | None,
        typer.Option(help="Spark master (storage: local[1] for file sources; compute: local[2])"),
    ] = None,
    listen: Annotated[
        str | None, typer.Option(help="HOST:PORT to listen on (instead of --host/--port)")
    ] = None,
    scratch_dir: Annotated[
        Path | None, typer.Option(help="compute: directory for arrangements (owned, emptied)")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="compute: serve Prometheus metrics on 127.0.0.1:PORT")
    ] = None,
    driver_memory: Annotated[str, typer.Option(help="compute: Spark driver memory")] = "1g",
) -> None:
    """Run a replica process that a controller connects to."""
    if listen is not None:
        listen_host, sep, listen_port = listen.rpartition(":")
        if not sep or not listen_port.isdigit():
            raise typer.BadParameter(f"--listen must be HOST:PORT, got {listen!r}")
        host, port = listen_host.strip("[]"), int(listen_port)
    if role == "compute":
        if scratch_dir is None:
            raise typer.BadParameter("a compute replica needs --scratch-dir")
        from spate.compute.replica.main import run as run_compute

        run_compute(
            listen=f"{host}:{port}",
            secret_file=secret_file,
            scratch_dir=scratch_dir,
            spark_master=spark_master or "local[2]",
            driver_memory=driver_memory,
            persist_blob=blob_uri or None,
            persist_consensus=consensus_uri or None,
            replica_id=replica_id,
            metrics_port=metrics_port,
        )
        return
    if role == "storage":
        if not blob_uri or not consensus_uri:
            raise typer.BadParameter("a storage replica needs --blob-uri and --consensus-uri")
        from spate.storage.replica.main import run

        run(
            host=host,
            port=port,
            blob_uri=blob_uri,
            consensus_uri=consensus_uri,
            secret_file=secret_file,
            replica_id=replica_id,
            spark_master=spark_master or "local[1]",
            secrets_dir=secrets_dir,
        )
        return
    raise typer.BadParameter(f"unknown replica role {role!r}; known: storage, compute")


@app.command()
def version() -> None:
    """Print spate's version."""
    typer.echo(spate.__version__)


def main() -> None:
    app()
