"""The shell's statements run on a server over the PostgreSQL protocol (``spate sql`` on a data
directory that ``spate serve`` serves).

libpq (through psycopg's ``pq`` layer) sends each statement as a simple query and hands back
its values as the server's text, so the shell prints exactly what the server says, as psql
does. Results are read in libpq's single-row mode from a non-blocking loop that waits on the
socket: a SUBSCRIBE prints its changes as they arrive, and Ctrl-C (a ``KeyboardInterrupt`` in
that wait) sends the server a cancel request and drains what is left of the statement.
"""

from __future__ import annotations

import itertools
import select
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from spate.errors import SpateError

if TYPE_CHECKING:
    import psycopg
    from psycopg import pq


class ServerError(SpateError):
    """An error the server answered a statement with (its SQLSTATE and message as sent)."""

    def __init__(self, sqlstate: str, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.detail = detail


@dataclass
class RemoteRunner:
    """Runs statements on ``conn``; :meth:`run` is a :class:`~spate.cli.sql.Shell`'s ``run``
    and :meth:`tag` its ``tag``. ``notice`` prints a server's NOTICE."""

    conn: psycopg.Connection[Any]
    notice: Any = print
    _tag: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.conn.add_notice_handler(self._on_notice)

    def _on_notice(self, diag: Any) -> None:
        self.notice(f"{diag.severity or 'NOTICE'}:  {diag.message_primary}")

    def tag(self, sql: str) -> str | None:
        """The command tag of the statement that just ran (``INSERT 0 3``)."""
        return self._tag

    def run(self, sql: str) -> pa.Table | Iterator[list[tuple[int, tuple[Any, ...], int]]] | None:
        """Run ``sql``: its rows (every value the server's text), a stream of changes (a
        SUBSCRIBE), or ``None`` (a command: :meth:`tag`). Raises :class:`ServerError`."""
        import psycopg
        from psycopg import pq

        self._tag = None
        pg = self.conn.pgconn
        try:
            pg.send_query_params(sql.encode(), None)
        except psycopg.OperationalError as e:  # the connection is gone
            raise ServerError("08006", str(e)) from None
        pg.set_single_row_mode()
        results = self._results()
        first = next(results, None)
        if first is None:
            return None
        status = first.status
        if status == pq.ExecStatus.SINGLE_TUPLE and _is_subscribe(first):
            return self._stream(first, results)
        rows: list[list[str | None]] = []
        columns = _columns(first)
        last = first
        for res in [first, *results]:
            last = res
            if res.status == pq.ExecStatus.SINGLE_TUPLE:
                rows.append(_row(res))
        self._tag = (last.command_status or b"").decode() or None
        if columns is None:
            return None
        return pa.table(
            {name: pa.array([r[i] for r in rows], pa.string()) for i, name in enumerate(columns)}
        )

    def _results(self) -> Iterator[pq.abc.PGresult]:
        """The statement's results until the last; raises the first error after draining;
        Ctrl-C sends a cancel request and keeps draining."""
        from psycopg import pq

        pg = self.conn.pgconn
        failed: ServerError | None = None
        canceled = False
        while True:
            try:
                while pg.is_busy():
                    select.select([pg.socket], [], [], 0.2)
                    pg.consume_input()
            except KeyboardInterrupt:
                if canceled:
                    raise
                canceled = True
                self.conn.cancel_safe()
                continue
            res = pg.get_result()
            if res is None:
                break
            if res.status == pq.ExecStatus.FATAL_ERROR and failed is None:
                failed = _error(res)
            elif failed is None and not canceled:
                yield res
        if canceled:  # (the server's 57014 is the cancel this raises)
            raise KeyboardInterrupt
        if failed is not None:
            raise failed

    def _stream(
        self, first: pq.abc.PGresult, results: Iterator[pq.abc.PGresult]
    ) -> Iterator[list[tuple[int, tuple[Any, ...], int]]]:
        """A SUBSCRIBE's changes as the shell prints them: (time, row, diff), one at a time;
        closing it (Ctrl-C while printing) cancels the statement."""
        from psycopg import pq

        try:
            for res in itertools.chain([first], results):  # (never a list: it has no end)
                if res.status == pq.ExecStatus.SINGLE_TUPLE:
                    t, d, *row = _row(res)
                    yield [(int(t or 0), tuple(row), int(d or 0))]
        finally:
            if self.conn.pgconn.is_busy() or self.conn.pgconn.transaction_status == 1:
                self.conn.cancel_safe()
                for _ in self._drain():
                    pass

    def _drain(self) -> Iterator[None]:
        pg = self.conn.pgconn
        while True:
            while pg.is_busy():
                select.select([pg.socket], [], [], 0.2)
                pg.consume_input()
            if pg.get_result() is None:
                return
            yield None


def _columns(res: pq.abc.PGresult) -> list[str] | None:
    from psycopg import pq

    if res.status not in (pq.ExecStatus.SINGLE_TUPLE, pq.ExecStatus.TUPLES_OK):
        return None
    return [(res.fname(i) or b"").decode() for i in range(res.nfields)]


def _row(res: pq.abc.PGresult) -> list[str | None]:
    values = (res.get_value(0, i) for i in range(res.nfields))
    return [None if v is None else bytes(v).decode() for v in values]


def _is_subscribe(res: pq.abc.PGresult) -> bool:
    names = _columns(res) or []
    return names[:2] == ["mz_timestamp", "mz_diff"]


def _error(res: pq.abc.PGresult) -> ServerError:
    from psycopg import pq

    def field_(code: pq.DiagnosticField) -> str | None:
        v = res.error_field(code)
        return None if v is None else v.decode(errors="replace")

    return ServerError(
        field_(pq.DiagnosticField.SQLSTATE) or "XX000",
        field_(pq.DiagnosticField.MESSAGE_PRIMARY) or "the server failed the statement",
        field_(pq.DiagnosticField.MESSAGE_DETAIL),
    )


def connect(host: str, port: int, password: str | None) -> psycopg.Connection[Any]:
    """A connection to the server, autocommit as psql's is."""
    import psycopg

    return psycopg.connect(
        host=host,
        port=port,
        user="spate",
        dbname="materialize",
        password=password,
        autocommit=True,
        application_name="spate sql",
    )
