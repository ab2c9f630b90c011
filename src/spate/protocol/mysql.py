"""MySQL/MariaDB sources as a storage replica receives them.

The client settings (host, port, user and password) travel as a
:class:`~spate.protocol.secret.Secret` holding a JSON object, so that the password never reaches
the catalog or the logs (:func:`mysql_connection_settings` builds it). Each export of the
ingestion names one upstream table as ``"database.table"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from spate.errors import InvalidConnection
from spate.protocol.secret import Secret, SecretRef
from spate.wire import wire


def mysql_connection_settings(
    host: str, port: int = 3306, user: str = "root", password: str | None = None
) -> Secret:
    """The client settings of a MySQL connection (the password stays inside the secret)."""
    if not isinstance(host, str) or not host.strip():
        raise InvalidConnection(f"a MySQL connection needs a host, got {host!r}")
    if not isinstance(port, int) or not 0 < port < 65536:
        raise InvalidConnection(f"a MySQL connection's port must be 1..65535, got {port!r}")
    settings: dict[str, object] = {"host": host, "port": port, "user": user}
    if password is not None:
        settings["password"] = password
    return Secret(json.dumps(settings, sort_keys=True))


@wire("storage.mysql_source")
@dataclass(frozen=True, slots=True)
class MySqlSource:
    """Change data capture from a MariaDB server's row-based binary log.

    The replica takes a consistent snapshot of every exported table (``SourceExport.reference``
    = ``"database.table"``) at a GTID position, then streams the inserts, updates (as a
    retraction and an insertion) and deletes committed after it, resuming from the GTID
    position recorded in the remap collection. ``server_id`` identifies the binlog reader to
    the server as a replica would (unique among the server's replicas).
    """

    connection: Secret | SecretRef
    server_id: int = 0x5EA7

    def __post_init__(self) -> None:
        if not isinstance(self.server_id, int) or not 0 < self.server_id < 2**32:
            raise InvalidConnection(
                f"a MySQL source's server id must be 1..4294967295, got {self.server_id!r}"
            )
