"""Where persist keeps its data: the ``Blob`` and ``Consensus`` interfaces and ``PersistLocation``.

**Blob** is a store of write-once keys: a key is set once to its final bytes and never modified
(a retried ``set`` of the same key writes the same bytes). It need not be linearizable; batch
data lives here.

**Consensus** is a linearizable log per key of ``(seqno, data)`` entries: shard state lives here.
``compare_and_set(key, expected, data)`` appends ``data`` at seqno ``expected + 1`` (``0`` when
``expected`` is ``None``) if and only if the latest entry has seqno ``expected`` (or the key has
no entry when ``expected`` is ``None``). ``truncate(key, seqno)`` deletes the entries below
``seqno``; the head is never deleted.

Both raise :class:`~spate.errors.Determinate` when an operation certainly had no effect and
:class:`~spate.errors.Indeterminate` when it may have. Every implementation passes the
conformance suites in ``tests/conformance``.

A :class:`PersistLocation` names a blob store and a consensus store by URI so that any process
(controllers, replicas, ``spate persist inspect``) opens the same shards:

==========================================================  ===========================
URI                                                          opens
==========================================================  ===========================
``file:///abs/dir``                                          :class:`FileBlob`
``s3://bucket/prefix?endpoint=http://host:port&region=r``    :class:`S3Blob`
``mem://name``                                               :class:`MemBlob` / ``MemConsensus``
``sqlite:///abs/path.db``                                    :class:`SqliteConsensus`
``postgresql://user@host:port/db?table=t&schema=s``          :class:`PostgresConsensus`
==========================================================  ===========================

``mem://`` stores live in the opening process only (one store per name). S3 credentials come from
the usual AWS environment (``AWS_ACCESS_KEY_ID``…), never from the URI; a PostgreSQL password may
appear in the URI but is redacted from ``str``, ``repr`` and logs (prefer ``PGPASSWORD``).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from spate.persist.blob import Blob as Blob
from spate.persist.blob import check_blob_key as check_blob_key
from spate.persist.consensus import CasOp as CasOp
from spate.persist.consensus import Consensus as Consensus
from spate.persist.consensus import VersionedData as VersionedData
from spate.persist.consensus import check_consensus_key as check_consensus_key
from spate.persist.consensus import next_seqno as next_seqno
from spate.persist.consensus import redact_uri as redact_uri
from spate.persist.errors import InvalidLocation
from spate.wire import wire

# --- locations -------------------------------------------------------------------------------

_BLOB_SCHEMES: Final = ("file", "mem", "s3")
_CONSENSUS_SCHEMES: Final = ("sqlite", "mem", "postgresql", "postgres")


def _check_blob_uri(uri: str) -> None:
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in _BLOB_SCHEMES:
        raise InvalidLocation(
            redact_uri(uri), f"blob scheme must be one of {', '.join(_BLOB_SCHEMES)}"
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise InvalidLocation(uri, "a file blob needs an absolute path: file:///abs/dir")
    elif parts.scheme == "mem":
        if not parts.netloc:
            raise InvalidLocation(uri, "a mem blob needs a name: mem://name")
    elif not parts.netloc:
        raise InvalidLocation(uri, "an s3 blob needs a bucket: s3://bucket/prefix")


def _check_consensus_uri(uri: str) -> None:
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in _CONSENSUS_SCHEMES:
        raise InvalidLocation(
            redact_uri(uri),
            f"consensus scheme must be one of {', '.join(_CONSENSUS_SCHEMES)}",
        )
    if parts.scheme == "sqlite":
        if parts.netloc or not parts.path.startswith("/"):
            raise InvalidLocation(uri, "sqlite consensus needs an absolute path: sqlite:///abs.db")
    elif parts.scheme == "mem":
        if not parts.netloc:
            raise InvalidLocation(uri, "a mem consensus needs a name: mem://name")
    elif not parts.hostname and not parts.path.strip("/"):
        raise InvalidLocation(redact_uri(uri), "postgresql consensus needs a host or a database")


@wire("persist.location")
@dataclass(frozen=True, slots=True)
class PersistLocation:
    """A blob store and a consensus store, by URI (see the module docs).

    Encodable by the codec (it travels to replicas in commands). ``str`` and ``repr`` redact
    passwords; :meth:`parse` validates; ``PersistLocation.parse(l.blob_uri, l.consensus_uri) ==
    l``.
    """

    blob_uri: str
    consensus_uri: str

    def __post_init__(self) -> None:
        _check_blob_uri(self.blob_uri)
        _check_consensus_uri(self.consensus_uri)

    @staticmethod
    def parse(blob_uri: str, consensus_uri: str) -> PersistLocation:
        return PersistLocation(blob_uri.strip(), consensus_uri.strip())

    @staticmethod
    def embedded(data_dir: str | Path) -> PersistLocation:
        """The embedded default: ``<data_dir>/blob`` files, ``<data_dir>/consensus.db`` SQLite."""
        root = Path(data_dir).resolve()
        return PersistLocation(
            blob_uri=(root / "blob").as_uri(),
            consensus_uri="sqlite://" + urllib.parse.quote(str(root / "consensus.db")),
        )

    @staticmethod
    def memory(name: str) -> PersistLocation:
        """Process-local in-memory stores (tests, simulation)."""
        return PersistLocation(f"mem://{name}", f"mem://{name}")

    def __str__(self) -> str:
        return f"blob={redact_uri(self.blob_uri)} consensus={redact_uri(self.consensus_uri)}"

    def __repr__(self) -> str:
        return (
            f"PersistLocation(blob_uri={redact_uri(self.blob_uri)!r}, "
            f"consensus_uri={redact_uri(self.consensus_uri)!r})"
        )


def _query(parts: urllib.parse.SplitResult) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        out[k] = v
    return out


def open_blob(uri: str) -> Blob:
    """Open the blob store named by ``uri`` (see the module docs)."""
    _check_blob_uri(uri)
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme == "file":
        from spate.persist.blob_file import FileBlob

        return FileBlob(Path(urllib.parse.unquote(parts.path)))
    if parts.scheme == "mem":
        from spate.persist.blob_mem import MemBlob

        return MemBlob.named(parts.netloc)
    from spate.persist.blob_s3 import S3Blob

    q = _query(parts)
    unknown = set(q) - {"endpoint", "region"}
    if unknown:
        raise InvalidLocation(
            uri, f"unknown s3 parameters {sorted(unknown)}; known: endpoint, region"
        )
    return S3Blob(
        bucket=parts.netloc,
        prefix=parts.path.strip("/"),
        endpoint_url=q.get("endpoint"),
        region=q.get("region"),
    )


def open_consensus(uri: str) -> Consensus:
    """Open the consensus store named by ``uri`` (see the module docs)."""
    _check_consensus_uri(uri)
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme == "sqlite":
        from spate.persist.consensus_sqlite import SqliteConsensus

        return SqliteConsensus(Path(urllib.parse.unquote(parts.path)))
    if parts.scheme == "mem":
        from spate.persist.consensus_mem import MemConsensus

        return MemConsensus.named(parts.netloc)
    from spate.persist.consensus_postgres import PostgresConsensus

    return PostgresConsensus.from_uri(uri)
