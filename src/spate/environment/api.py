"""``spate.Environment``: the Python API.

::

    env = Environment.open("data")
    env.create_cluster("c1", replicas=2)
    env.create_table("bids", RelationDesc.of(("auction", INT64, False), ("price", INT64, False)))
    env.insert("bids", [(1, 10), (1, 25), (2, 7)])
    top = env.get("bids").reduce(["auction"], top=max_(col("price")))
    env.create_materialized_view("top_bids", top, cluster="c1")
    env.create_index("top_bids_by_auction", on="top_bids", key=["auction"])
    env.select("top_bids")                      # a pyarrow Table, consistent with every insert
    for changes in env.subscribe("top_bids"):   # [(time, row, diff), ...] per closed interval
        ...
    env.close()

Every method is synchronous and thread-safe: the environment runs its controllers on an event
loop in a thread of its own, and each call is carried out there. Every call validates first and
either happens completely or not at all; errors name the objects, columns and frontiers.
Reopening the same data directory restores everything: catalog, clusters, dataflows, data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from spate.environment.base import EnvironmentBase as EnvironmentBase
from spate.environment.operations import EnvironmentOperations
from spate.environment.sql_state import Session
from spate.errors import EnvironmentClosed as EnvironmentClosed
from spate.repr.types import Row

if TYPE_CHECKING:
    from spate.environment.sql import SqlSession

__all__ = ["Environment", "EnvironmentClosed"]


class Environment(EnvironmentOperations):
    """An open spate environment. Create with :meth:`open`; close with :meth:`close`.

    Opening, closing and status are :class:`~spate.environment.base.EnvironmentBase`'s;
    clusters, objects, writes and reads are
    :class:`~spate.environment.operations.EnvironmentOperations`'; SQL is here, carried out by
    those operations.

    Example::

        with spate.Environment.open("spate-data") as env:
            env.create_cluster("c", replicas=2)
            ...
    """

    _sql: Session | None = None

    # -- SQL -------------------------------------------------------------------------------------

    def sql(
        self, text: str, *, dialect: str = "postgres"
    ) -> pa.Table | Iterator[list[tuple[int, Row, int]]] | None:
        """Run one or more ``;``-separated SQL statements; return the last one's result: a
        ``pyarrow.Table`` for SELECT, SHOW and EXPLAIN, the iterator of :meth:`subscribe` for
        SUBSCRIBE, ``None`` otherwise. ``dialect`` is ``"postgres"`` (as Materialize speaks
        it) or ``"spark"``. A statement that fails raises :class:`spate.sql.SqlError` (or the
        error of the operation it ran) and changes nothing; earlier statements stay done,
        unless they are in a transaction block: ``BEGIN`` … ``COMMIT``/``ROLLBACK`` (in one call
        or across calls) buffers the block's writes until COMMIT, with Materialize's rules
        (:mod:`spate.environment.sql_block`).

        Example::

            env.sql("CREATE TABLE bids (auction bigint NOT NULL, price bigint NOT NULL)")
            env.sql("INSERT INTO bids VALUES (1, 10), (1, 25)")
            env.sql("SELECT auction, max(price) FROM bids GROUP BY auction")   # a pyarrow Table
            env.sql("BEGIN; INSERT INTO bids VALUES (2, 5); ROLLBACK")          # writes nothing
        """
        from spate.environment import sql as sql_exec

        return sql_exec.run(self, text, dialect, self._sql_state())

    def sql_session(self) -> SqlSession:
        """A SQL session of its own (its ``SET cluster``, ``SET transaction_isolation``…), for
        one client connection: ``session.sql(text, dialect=…)`` is :meth:`sql` with those
        settings. Objects (and what SQL keeps about them) are the environment's catalog, shared
        by every session.

        Example::

            session = env.sql_session()
            session.sql("SET cluster = c")
            session.sql("SELECT * FROM best")    # read on cluster c; other sessions unaffected
        """
        from spate.environment import sql as sql_exec

        return sql_exec.SqlSession(self, Session())

    def _sql_state(self) -> Session:
        """The session of :meth:`sql`."""
        if self._sql is None:
            self._sql = Session()
        return self._sql
