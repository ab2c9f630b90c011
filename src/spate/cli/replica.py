"""``spate replica``: run a replica process that a controller connects to."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Annotated

import typer

from spate.cli.app import app


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
    spark_conf: Annotated[
        list[str] | None,
        typer.Option(help="compute: a spark.KEY=VALUE setting for the session (repeatable)"),
    ] = None,
    grace_period: Annotated[
        float | None,
        typer.Option(
            help="exit after this many seconds without a controller (default: run until stopped)"
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option(help="TLS: this replica's certificate (PEM)")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option(help="TLS: its private key (PEM)")] = None,
    tls_ca: Annotated[
        Path | None,
        typer.Option(help="TLS: the CA that signed the controller's client certificate"),
    ] = None,
) -> None:
    """Run a replica process that a controller connects to.

    A non-loopback listen address needs authentication: the shared secret (``--secret-file``),
    mutual TLS (``--tls-cert``, ``--tls-key``, ``--tls-ca``: the controller must present a
    certificate the CA signed), or both.
    """
    conf: dict[str, str] = {}
    for item in spark_conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("spark."):
            raise typer.BadParameter(f"--spark-conf must be spark.KEY=VALUE, got {item!r}")
        conf[key] = value
    if grace_period is not None and not grace_period > 0:
        raise typer.BadParameter(f"--grace-period must be positive, got {grace_period}")
    if listen is not None:
        listen_host, sep, listen_port = listen.rpartition(":")
        if not sep or not listen_port.isdigit():
            raise typer.BadParameter(f"--listen must be HOST:PORT, got {listen!r}")
        host, port = listen_host.strip("[]"), int(listen_port)
    tls = _tls_context(tls_cert, tls_key, tls_ca)
    if secret_file is None:
        # Refuse at once (a compute replica would first start its Spark driver).
        from spate.protocol.transport import check_bind

        check_bind(host, secret=None, tls=tls)
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
            spark_conf=conf,
            grace_s=grace_period,
            tls=tls,
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
            grace_s=grace_period,
            tls=tls,
        )
        return
    raise typer.BadParameter(f"unknown replica role {role!r}; known: storage, compute")


def _tls_context(cert: Path | None, key: Path | None, ca: Path | None) -> ssl.SSLContext | None:
    """The server TLS context (client certificates required), or ``None`` without TLS."""
    given = {"--tls-cert": cert, "--tls-key": key, "--tls-ca": ca}
    if all(v is None for v in given.values()):
        return None
    missing = [flag for flag, v in given.items() if v is None]
    if missing:
        raise typer.BadParameter(f"TLS needs --tls-cert, --tls-key and --tls-ca; missing {missing}")
    for flag, path in given.items():
        if path is not None and not path.is_file():
            raise typer.BadParameter(f"{flag} {str(path)!r} is not a readable file")
    from spate.protocol.tls import server_tls_context

    assert cert is not None and key is not None and ca is not None
    try:
        return server_tls_context(cert, key, ca)
    except (ssl.SSLError, OSError) as e:
        raise typer.BadParameter(f"cannot load the TLS certificate, key or CA: {e}") from None
