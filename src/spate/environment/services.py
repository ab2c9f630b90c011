"""How an environment's settings become its data layout and its replica services' commands.

Local replicas are ``spate replica`` processes the orchestrator starts on loopback; their
command carries everything they need from the settings (persist location, the cluster's Spark
master and ``spark.*`` settings, the grace period after which an unheld replica exits, the log
level). Replicas placed elsewhere (``HOST:PORT``) are started by someone else with the same
command and a ``--listen`` address of their own; with ``[tls]`` settings, the controllers reach
them over mutual TLS (:func:`placed_auth`) and their shown command carries ``--tls-*`` flags.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from spate.config import Settings
from spate.environment.layout import Layout
from spate.orchestrator.service import SERVICE_DIR_PLACEHOLDER, ServiceConfig
from spate.orchestrator.supervisor import Supervisor
from spate.persist.location import PersistLocation
from spate.protocol.tls import PeerAuth, client_tls_context


def layout_of(data_dir: Path, settings: Settings) -> Layout:
    """The data directory ``data_dir`` with the persist location and secrets directory the
    settings name (embedded defaults under ``data_dir`` where they name none)."""
    embedded = PersistLocation.embedded(data_dir)
    p = settings.persist
    persist = None
    if p.blob is not None or p.consensus is not None:
        persist = PersistLocation.parse(
            p.blob or embedded.blob_uri, p.consensus or embedded.consensus_uri
        )
    secrets = settings.secrets_dir.resolve() if settings.secrets_dir is not None else None
    return Layout(Path(data_dir), persist=persist, secrets_path=secrets)


def placed_auth(layout: Layout, settings: Settings) -> PeerAuth | None:
    """How the controllers authenticate to a replica placed elsewhere: ``None`` (the shared
    secret, as for local replicas) unless ``[tls]`` is configured; then mutual TLS, with the
    secret inside it only if ``tls.with_secret``."""
    tls = settings.tls
    if tls.ca_file is None or tls.cert_file is None or tls.key_file is None:
        return None
    context = client_tls_context(tls.ca_file, certfile=tls.cert_file, keyfile=tls.key_file)
    return PeerAuth(secret=layout.secret() if tls.with_secret else None, tls=context)


def _auth_args(layout: Layout, settings: Settings, placed: bool) -> list[str]:
    """``--secret-file`` and, for a replica placed elsewhere under ``[tls]``, ``--tls-*``
    (where that host keeps its certificate: shown as placeholders)."""
    if not placed or not settings.tls.enabled:
        return ["--secret-file", str(layout.secret_file)]
    args = ["--tls-cert", "REPLICA_CERT", "--tls-key", "REPLICA_KEY", "--tls-ca", "CA_FILE"]
    if settings.tls.with_secret:
        args += ["--secret-file", str(layout.secret_file)]
    return args


def _spark_args(settings: Settings, cluster: str) -> list[str]:
    spark = settings.spark_for(cluster)
    args = ["--spark-master", spark.master, "--driver-memory", spark.driver_memory]
    for key, value in sorted(spark.session_conf().items()):
        args += ["--spark-conf", f"{key}={value}"]
    return args


def compute_replica_service(
    layout: Layout, settings: Settings, *, cluster: str, replica: str, address: str | None = None
) -> ServiceConfig:
    """``spate replica --role compute`` for one replica of ``cluster``; with ``address``
    (``HOST:PORT``), one placed elsewhere, listening there (its command is only shown)."""
    loc = layout.location()
    return ServiceConfig(
        argv=(
            sys.executable,
            "-m",
            "spate",
            "replica",
            "--role",
            "compute",
            "--listen",
            address or "127.0.0.1:{port:listen}",
            *_auth_args(layout, settings, address is not None),
            "--scratch-dir",
            f"{SERVICE_DIR_PLACEHOLDER}/scratch" if address is None else "SCRATCH_DIR",
            "--blob-uri",
            loc.blob_uri,
            "--consensus-uri",
            loc.consensus_uri,
            "--replica-id",
            replica,
            "--grace-period",
            f"{settings.replicas.grace_period_s:g}",
            *_spark_args(settings, cluster),
            *(() if address else ("--metrics-port", "{port:metrics}")),
        ),
        ports=("listen",) if address else ("listen", "metrics"),
        env=child_env(settings),
        address=address,
    )


def storage_replica_service(layout: Layout, settings: Settings, replica: str) -> ServiceConfig:
    """``spate replica --role storage``: runs sources and sinks (placed elsewhere when the
    settings name ``replicas.storage``)."""
    address = settings.replicas.storage
    loc = layout.location()
    return ServiceConfig(
        argv=(
            sys.executable,
            "-m",
            "spate",
            "replica",
            "--role",
            "storage",
            "--listen",
            address or "127.0.0.1:{port:listen}",
            *_auth_args(layout, settings, address is not None),
            "--secrets-dir",
            str(layout.secrets_dir),
            "--blob-uri",
            loc.blob_uri,
            "--consensus-uri",
            loc.consensus_uri,
            "--replica-id",
            replica,
            "--grace-period",
            f"{settings.replicas.grace_period_s:g}",
        ),
        env=child_env(settings),
        address=address,
    )


def child_env(settings: Settings) -> dict[str, str]:
    """Children import the same ``spate`` package as this process and log at its level."""
    src = str(Path(__file__).resolve().parents[2])  # the directory holding the spate package
    path = os.environ.get("PYTHONPATH", "")
    parts = [src] + [p for p in path.split(os.pathsep) if p and p != src]
    return {"PYTHONPATH": os.pathsep.join(parts), "SPATE_LOG_LEVEL": settings.log_level}


def local_replica_metrics_ports(orchestrator: Supervisor) -> list[int]:
    """The metrics ports of the local compute replicas (their own Prometheus series)."""
    ports = []
    for name in orchestrator.list_services():
        service = orchestrator.service(name)
        if orchestrator.placed(name) is None and "metrics" in service.ports:
            ports.append(service.ports["metrics"])
    return ports
