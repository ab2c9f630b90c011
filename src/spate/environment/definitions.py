"""What SQL keeps about the catalog's objects, in the catalog itself.

An object made in SQL keeps the statement that made it (``SHOW CREATE``, ``pg_get_viewdef``, a
table's DEFAULTs and declared types, a webhook source's CHECK) and, for a view, the PostgreSQL
types of its columns (``int4``, ``float4``…: what its reads return): a :class:`Definition` of
the item's id. Secrets and connections are catalog entries of their own
(:class:`SecretEntry`, :class:`ConnectionEntry`), in the namespace of the items.

All of them are fields of :class:`~spate.environment.catalog.CatalogState` and change only in
its compare-and-set, in the same commit as the object they describe: a definition is added by
the change that adds its item (:class:`SqlDefinition`, handed to the ``create_*`` operations),
removed by the one that removes it, and renamed by the one that renames it. There is no other
copy: a reader reads them from the catalog state.
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.ids import GlobalId
from spate.protocol.secret import SecretRef
from spate.storage.secrets import SecretsDir
from spate.wire import wire


@dataclass(frozen=True, slots=True)
class SqlDefinition:
    """How SQL describes an object it creates: ``create_sql``, the statement as written (or
    as SHOW CREATE shows it), and ``types``, the PostgreSQL type names of a view's columns
    (empty for the other objects). The SQL layer hands it to the operation that creates the
    object, which commits it with the object."""

    create_sql: str
    types: tuple[str, ...] = ()
    connection: str | None = None
    """The SQL connection (``CREATE CONNECTION``) a source or sink was made with: DROP
    CONNECTION refuses to drop it while they exist."""


@wire("catalog.definition")
@dataclass(frozen=True, slots=True)
class Definition:
    """The :class:`SqlDefinition` of item ``id``. There is at most one per item; it exists
    only while the item does."""

    id: GlobalId
    create_sql: str
    types: tuple[str, ...] = ()
    connection: str | None = None


@wire("catalog.secret")
@dataclass(frozen=True, slots=True)
class SecretEntry:
    """``CREATE SECRET name AS '…'``: the value is in the environment's secrets directory
    under ``reference``, never in the catalog; ``create_sql`` shows it masked."""

    name: str
    create_sql: str
    reference: SecretRef


@wire("catalog.connection")
@dataclass(frozen=True, slots=True)
class ConnectionEntry:
    """``CREATE CONNECTION name TO <kind> (…)``: ``kind`` is ``postgres``, ``kafka`` or
    ``mysql``; ``options`` its options by lower-case name (``host``, ``broker``…); ``secret``
    the name of the secret holding its password, if any."""

    name: str
    create_sql: str
    kind: str
    options: tuple[tuple[str, str], ...]
    secret: str | None = None

    def option(self, key: str, default: str | None = None) -> str | None:
        return next((v for k, v in self.options if k == key), default)

    @property
    def option_map(self) -> dict[str, str]:
        return dict(self.options)


def secret_value(secrets: tuple[SecretEntry, ...], directory: SecretsDir, name: str) -> str:
    """The value of SQL secret ``name`` (read from ``directory``). Raises ``KeyError`` for a
    secret the catalog does not have."""
    for entry in secrets:
        if entry.name == name:
            return directory.get(entry.reference).reveal()
    raise KeyError(name)
