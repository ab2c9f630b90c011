"""A PostgreSQL source resolved against the upstream catalog: its tables and their types.

The wire form of a PostgreSQL source is :class:`spate.protocol.storage_desc.PostgresSource` plus
the ingestion's exports; a replica resolves it into a :class:`PostgresConnection` by describing
each exported table upstream (:mod:`.catalog`) and checking it against the export's schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spate.repr.desc import RelationDesc


def quote_ident(name: str) -> str:
    """A PostgreSQL identifier, always quoted (``"my ""odd"" name"``)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class PostgresTable:
    """One upstream table: its name, its columns as spate sees them and their PostgreSQL types.

    ``type_oids`` are the upstream column types at creation; a change stream whose relation
    description differs (columns added, dropped, retyped) stops the source with an error.
    """

    schema: str
    name: str
    desc: RelationDesc
    type_oids: tuple[int, ...]

    @property
    def output(self) -> str:
        """The output name of the table's collection: ``schema.name``."""
        return f"{self.schema}.{self.name}"

    @property
    def sql_name(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"


@dataclass(frozen=True, slots=True)
class PostgresConnection:
    """A PostgreSQL source: tables of ``publication`` replicated through slot ``slot``.

    ``url`` may hold credentials: it is never logged and never part of ``repr``. The slot is
    created by the source on its first run and belongs to it; dropping the source drops it.
    """

    url: str = field(repr=False)
    publication: str
    slot: str
    tables: tuple[PostgresTable, ...]
    max_changes_per_poll: int = 100_000

    def outputs(self) -> dict[str, RelationDesc]:
        return {t.output: t.desc for t in self.tables}
