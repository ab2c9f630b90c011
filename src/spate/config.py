"""All settings in one model: ``SPATE_*`` environment variables, a TOML file, arguments.

Precedence, highest first: explicit arguments (``Environment.open(settings=...)``, CLI flags),
environment variables (``SPATE_DATA_DIR``, ``SPATE_SPARK__MASTER``, ``SPATE_PERSIST__BLOB``…;
``__`` separates nesting levels, dictionaries are JSON), the TOML file (``--config FILE`` or
``SPATE_CONFIG``), defaults. Every field is used; ``spate config`` prints the effective values
with secrets redacted (:func:`redacted`).

::

    data_dir = "/var/lib/spate"
    log_level = "INFO"
    metrics_port = 9464                  # Prometheus endpoint of the environment
    table_tick_ms = 1000                 # idle tables advance with the clock this often

    [persist]                            # default: files and SQLite under data_dir
    blob = "s3://bucket/spate?endpoint=http://minio:9000&region=us-east-1"
    consensus = "postgres://spate@db:5432/spate"

    [spark]                              # every cluster's replicas, unless overridden
    master = "spark://spark-master:7077"
    driver_memory = "2g"
    driver_bind_address = "0.0.0.0"      # spark.driver.bindAddress
    driver_host = "10.0.0.5"             # spark.driver.host: what executors connect back to
    conf = { "spark.executor.memory" = "4g", "spark.sql.shuffle.partitions" = "8" }

    [replicas]
    grace_period_s = 60                  # a replica no controller holds exits after this
    storage = "10.0.0.7:6870"            # optional: a storage replica started elsewhere

    [tls]                                # mutual TLS to replicas placed elsewhere
    ca_file = "/etc/spate/ca.pem"        # verifies the replicas' certificates
    cert_file = "/etc/spate/controller.pem"   # the controller's client certificate
    key_file = "/etc/spate/controller.key"
    with_secret = false                  # also run the shared-secret handshake inside TLS

    [clusters.big.spark]                 # per cluster: master, driver memory, conf
    master = "k8s://https://api:6443"
    [clusters.big.replicas]              # placement: replicas started elsewhere
    r1 = "10.0.0.8:6875"

S3 credentials come from the usual AWS sources (environment, profile, instance role), never
from these settings; a consensus password in its URI is redacted everywhere (prefer
``PGPASSWORD``).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
CONFIG_ENV: Final = "SPATE_CONFIG"
"""The environment variable naming the TOML settings file."""
_ADDRESS: Final = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")
_SECRET_KEY: Final = re.compile(r"secret|password|passwd|token|credential|access\.key", re.I)


def check_address(value: str) -> str:
    """``value`` if it is ``HOST:PORT`` (``[v6]:PORT``) with a port in 1..65535."""
    m = _ADDRESS.fullmatch(value.strip())
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise ValueError(f"an address must be HOST:PORT, got {value!r}")
    return value.strip()


def _check_conf(conf: dict[str, str]) -> dict[str, str]:
    for key in conf:
        if not key.startswith("spark."):
            raise ValueError(f"Spark settings are spark.* keys, got {key!r}")
    return {k: str(v) for k, v in conf.items()}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PersistSettings(_Section):
    """Where data lives. ``None``: files (``<data_dir>/blob``) and SQLite
    (``<data_dir>/consensus.db``) under the data directory."""

    blob: str | None = None
    """``file:///abs/dir`` or ``s3://bucket/prefix?endpoint=URL&region=R``."""
    consensus: str | None = Field(default=None, repr=False)
    """``sqlite:///abs/file.db`` or ``postgres://user@host:port/db``."""

    @field_validator("consensus")
    @classmethod
    def _consensus_scheme(cls, v: str | None) -> str | None:
        if v is not None and urllib.parse.urlsplit(v).scheme not in (
            "sqlite",
            "postgres",
            "postgresql",
            "mem",
        ):
            raise ValueError("consensus must be sqlite:///… or postgres://…")
        return v

    @field_validator("blob")
    @classmethod
    def _blob_scheme(cls, v: str | None) -> str | None:
        if v is not None and urllib.parse.urlsplit(v).scheme not in ("file", "s3", "mem"):
            raise ValueError("blob must be file:///… or s3://bucket/prefix")
        return v


class SparkSettings(_Section):
    """How a cluster's replicas run Spark."""

    master: str = "local[*]"
    """``local[N]``, ``local[*]``, ``spark://host:port``, ``k8s://https://…``, ``yarn``."""
    driver_memory: str = "2g"
    driver_bind_address: str = "127.0.0.1"
    """``spark.driver.bindAddress``: where a replica's Spark driver listens."""
    driver_host: str | None = None
    """``spark.driver.host``: the address executors connect back to (default: the bind
    address, unless that is a wildcard)."""
    conf: dict[str, str] = Field(default_factory=dict, repr=False)
    """Any ``spark.*`` setting, passed to every replica's session (these win)."""

    @field_validator("conf")
    @classmethod
    def _spark_keys(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_conf(v)

    def session_conf(self) -> dict[str, str]:
        """The ``spark.*`` settings a replica's session gets beyond master and memory."""
        out = {"spark.driver.bindAddress": self.driver_bind_address}
        host = self.driver_host
        if host is None and self.driver_bind_address not in ("0.0.0.0", "::"):  # noqa: S104
            host = self.driver_bind_address
        if host is not None:
            out["spark.driver.host"] = host
        out.update(self.conf)
        return out


class SparkOverrides(_Section):
    """A cluster's departures from the ``[spark]`` section (``None``: inherit)."""

    master: str | None = None
    driver_memory: str | None = None
    driver_bind_address: str | None = None
    driver_host: str | None = None
    conf: dict[str, str] = Field(default_factory=dict, repr=False)

    @field_validator("conf")
    @classmethod
    def _spark_keys(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_conf(v)


class ClusterSettings(_Section):
    """One cluster's Spark settings and the placement of its replicas."""

    spark: SparkOverrides = SparkOverrides()
    replicas: dict[str, str] = Field(default_factory=dict)
    """Replica name → ``HOST:PORT`` of a replica started elsewhere (``spate replica
    --listen``); replicas not named here are local processes."""

    @field_validator("replicas")
    @classmethod
    def _addresses(cls, v: dict[str, str]) -> dict[str, str]:
        return {name: check_address(addr) for name, addr in v.items()}


class ReplicaSettings(_Section):
    """Replica processes."""

    grace_period_s: float = Field(default=60.0, gt=0)
    """A replica that no controller has held for this long exits (an environment reopened
    sooner adopts it)."""
    storage: str | None = None
    """``HOST:PORT`` of a storage replica started elsewhere (default: a local process)."""

    @field_validator("storage")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        return None if v is None else check_address(v)


class TlsSettings(_Section):
    """Mutual TLS between the controllers and replicas placed elsewhere (``spate replica
    --tls-cert … --tls-key … --tls-ca …``): each side verifies the other's certificate against
    ``ca_file``. Local replica processes keep the shared secret on loopback."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    with_secret: bool = False
    """Also run the shared-secret handshake inside TLS (the replica then needs
    ``--secret-file``); by default the certificates alone authenticate."""

    @model_validator(mode="after")
    def _all_or_none(self) -> TlsSettings:
        given = [f for f in ("ca_file", "cert_file", "key_file") if getattr(self, f) is not None]
        if given and len(given) != 3:
            missing = sorted({"ca_file", "cert_file", "key_file"} - set(given))
            raise ValueError(
                f"tls needs ca_file, cert_file and key_file together; missing {missing}"
            )
        for f in given:
            path = getattr(self, f)
            if not path.is_file():
                raise ValueError(f"tls.{f} {str(path)!r} is not a readable file")
        return self

    @property
    def enabled(self) -> bool:
        return self.ca_file is not None


class Settings(BaseSettings):
    """spate's settings (module docs). Every field has a safe default."""

    model_config = SettingsConfigDict(
        env_prefix="SPATE_",
        env_nested_delimiter="__",
        extra="forbid",
        toml_file=None,
        frozen=True,
    )

    data_dir: Path = Path("spate-data")
    log_level: LogLevel = "INFO"
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    """Serve the environment's Prometheus metrics here (``0``: any free port)."""
    metrics_host: str = "127.0.0.1"
    webhook_port: int | None = Field(default=None, ge=0, le=65535)
    """Serve webhook sources (``POST /api/webhook/<database>/<schema>/<source>``) here (``0``:
    any free port); off by default."""
    webhook_host: str = "127.0.0.1"
    webhook_max_body_bytes: int = Field(default=2 << 20, ge=1)
    """The largest webhook request body accepted; larger ones are answered 413."""
    table_tick_ms: int = Field(default=1000, ge=100, le=3_600_000)
    """How often every table (and the read timestamp) advances to the present without a write
    (writes move every table at once anyway): the freshness of reads and views over idle
    tables as the clock moves (``mz_now()`` filters, strict reads)."""
    small_read_updates: int = Field(default=10_000, ge=0)
    """A one-off read that would need a dataflow on a replica (a join, a subquery, an aggregate
    over tables) is evaluated in the environment instead when the snapshots it reads hold at
    most this many updates together (see :mod:`spate.environment.small_reads`): no Spark job
    for a small read. ``0``: every such read builds a dataflow."""
    default_cluster: str = Field(default="quickstart", pattern=r"^([A-Za-z_][A-Za-z0-9_]{0,62})?$")
    """The cluster that work naming none runs on when no cluster exists yet: it is created
    (with ``default_cluster_replicas`` replicas, started then) the first time something
    needs a cluster, like Materialize's ``quickstart``; ``""``: none (such work then fails
    until a cluster is created)."""
    default_cluster_replicas: int = Field(default=1, ge=1, le=16)
    """The size of ``default_cluster``: how many replicas it gets."""
    secrets_dir: Path | None = None
    """Connections' secrets, one file per id (default ``<data_dir>/secrets``)."""
    persist: PersistSettings = PersistSettings()
    spark: SparkSettings = SparkSettings()
    replicas: ReplicaSettings = ReplicaSettings()
    tls: TlsSettings = TlsSettings()
    clusters: dict[str, ClusterSettings] = Field(default_factory=dict)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml = settings_cls.model_config.get("toml_file")
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)

    # -- derived ------------------------------------------------------------------------------

    def spark_for(self, cluster: str) -> SparkSettings:
        """The Spark settings of ``cluster``'s replicas: ``[spark]`` with its overrides."""
        own = self.clusters.get(cluster)
        if own is None:
            return self.spark
        o = own.spark
        return self.spark.model_copy(
            update={
                "master": o.master or self.spark.master,
                "driver_memory": o.driver_memory or self.spark.driver_memory,
                "driver_bind_address": o.driver_bind_address or self.spark.driver_bind_address,
                "driver_host": o.driver_host or self.spark.driver_host,
                "conf": {**self.spark.conf, **o.conf},
            }
        )

    def placement(self, cluster: str) -> dict[str, str]:
        """``cluster``'s replicas started elsewhere: name → ``HOST:PORT``."""
        own = self.clusters.get(cluster)
        return {} if own is None else dict(own.replicas)


def load_settings(toml_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Settings from (in rising precedence) defaults, ``toml_file`` (default: the file named by
    ``SPATE_CONFIG``, if any), environment, ``overrides`` (``None`` values are ignored)."""
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if toml_file is None:
        toml_file = os.environ.get(CONFIG_ENV) or None
    if toml_file is None:
        return Settings(**overrides)
    path = Path(toml_file)
    if not path.is_file():
        raise FileNotFoundError(f"settings file {path} does not exist")

    class _FromFile(Settings):
        model_config = SettingsConfigDict(
            env_prefix="SPATE_", env_nested_delimiter="__", extra="forbid", toml_file=path
        )

    loaded = _FromFile(**overrides)
    return Settings.model_validate(loaded.model_dump())


def with_overrides(settings: Settings, **changes: Any) -> Settings:
    """``settings`` with top-level fields replaced (``None`` values are ignored), validated."""
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes:
        return settings
    return Settings.model_validate({**settings.model_dump(), **changes})


def redact_uri(uri: str) -> str:
    """``uri`` with any password replaced by ``***``."""
    try:
        parts = urllib.parse.urlsplit(uri)
        password = parts.password
    except ValueError:
        return "<unparseable uri>"
    if password is None:
        return uri
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def redacted(settings: Settings) -> dict[str, Any]:
    """The settings as plain data (JSON types), passwords and secret-looking Spark settings
    replaced by ``***``: what ``spate config`` prints."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    persist = data["persist"]
    for key in ("blob", "consensus"):
        if persist[key] is not None:
            persist[key] = redact_uri(persist[key])

    def conf(section: dict[str, Any]) -> None:
        section["conf"] = {
            k: ("***" if _SECRET_KEY.search(k) else v) for k, v in section["conf"].items()
        }

    conf(data["spark"])
    for cluster in data["clusters"].values():
        conf(cluster["spark"])
    return data
