"""Running the statements a session answers itself (see :mod:`spate.pgwire.statements`).

BEGIN, COMMIT and ROLLBACK track the status byte clients rely on (and the lifetime of
cursors) and are passed on to the engine (``Engine.transaction``, when it has one), which
keeps the block's writes until COMMIT: a COMMIT of a failed block (status ``E``) rolls back
and answers ROLLBACK, as PostgreSQL does; a COMMIT that fails ends the block (status ``I``).
SAVEPOINT, RELEASE and ROLLBACK TO SAVEPOINT are passed on too (as ``SAVEPOINT "name"``,
``RELEASE SAVEPOINT "name"``, ``ROLLBACK TO SAVEPOINT "name"``).

``DECLARE … CURSOR FOR SUBSCRIBE …`` and ``FETCH n [WITH (timeout = '…')]`` follow
Materialize: FETCH waits for at least one row (or the timeout), then returns up to ``n`` rows
that are already there.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa

from spate.pgwire import codec, guc, statements
from spate.pgwire import types as pgt
from spate.pgwire.binding import Prepared, cast_name
from spate.pgwire.copy import copy_in
from spate.pgwire.engine import ENGINE_VARS
from spate.pgwire.errors import PgError
from spate.pgwire.host import SessionHost
from spate.pgwire.output import CopyEncoder, RowEncoder, field_descs
from spate.pgwire.portal import Portal
from spate.sql import Argument, Parsed
from spate.sql.types import PgType, named_type


async def run_session_statement(
    s: SessionHost, stmt: statements.SessionStatement, *, describe: bool, formats: tuple[int, ...]
) -> None:
    if isinstance(stmt, statements.Begin):
        if s.status != "I":
            s.send(
                codec.notice_response(
                    "there is already a transaction in progress",
                    sqlstate="25001",
                    severity="WARNING",
                )
            )
        else:
            await s.engine_transaction(stmt)
        s.status = "T" if s.status == "I" else s.status
        s.send(codec.command_complete("BEGIN"))
    elif isinstance(stmt, statements.Commit):
        was = s.status
        _end_transaction(s)  # a COMMIT that fails ends the block too
        if was == "E":
            await s.engine_transaction(statements.Rollback())
        elif was == "T":
            await s.engine_transaction(stmt)
        s.send(codec.command_complete("ROLLBACK" if was == "E" else "COMMIT"))
    elif isinstance(stmt, statements.Rollback):
        if stmt.to_savepoint:
            if s.status == "I":
                raise PgError(
                    "25P01", "ROLLBACK TO SAVEPOINT can only be used in transaction blocks"
                )
            await s.engine_transaction(stmt)
            s.status = "T"
        else:
            _end_transaction(s)
            await s.engine_transaction(stmt)
        s.send(codec.command_complete("ROLLBACK"))
    elif isinstance(stmt, (statements.Savepoint, statements.Release)):
        tag = "SAVEPOINT" if isinstance(stmt, statements.Savepoint) else "RELEASE"
        if s.status == "I":
            raise PgError("25P01", f"{tag} can only be used in transaction blocks")
        await s.engine_transaction(stmt)
        s.send(codec.command_complete(tag))
    elif isinstance(stmt, statements.Discard):
        if stmt.what == "ALL":
            _close_cursors(s)
            s.prepared.clear()
        s.send(codec.command_complete(f"DISCARD {stmt.what}"))
    elif isinstance(stmt, statements.Listen):
        s.send(codec.command_complete("UNLISTEN" if stmt.unlisten else "LISTEN"))
    elif isinstance(stmt, statements.Prepare):
        await _prepare(s, stmt)
    elif isinstance(stmt, statements.Execute):
        await _execute(s, stmt, describe=describe, formats=formats)
    elif isinstance(stmt, statements.Deallocate):
        if stmt.name is None:
            s.prepared.clear()
            s.send(codec.command_complete("DEALLOCATE ALL"))
        else:
            if s.prepared.pop(stmt.name, None) is None:
                raise PgError("26000", f'prepared statement "{stmt.name}" does not exist')
            s.send(codec.command_complete("DEALLOCATE"))
    elif isinstance(stmt, statements.Set):
        if stmt.name is None and stmt.value is None:
            s.send(codec.command_complete("SET"))
        elif stmt.name is None:
            s.send(codec.command_complete("RESET"))
        else:
            if stmt.name in ENGINE_VARS:
                await s.engine_set(stmt)
            if stmt.name == "statement_timeout" and stmt.value is not None:
                s.set_var(stmt.name, guc.show_ms(guc.parse_ms(stmt.name, stmt.value)))
            else:
                s.set_var(stmt.name, stmt.value)
            s.send(codec.command_complete("SET" if stmt.value is not None else "RESET"))
    elif isinstance(stmt, statements.Show):
        _show(s, stmt.name, describe=describe, formats=formats)
    elif isinstance(stmt, statements.Declare):
        await _declare(s, stmt)
    elif isinstance(stmt, statements.Fetch):
        await _fetch(s, stmt, describe=describe, formats=formats)
    elif isinstance(stmt, statements.Close):
        if stmt.name is None:
            _close_cursors(s)
            s.send(codec.command_complete("CLOSE CURSOR ALL"))
        else:
            portal = s.portals.pop(stmt.name, None)
            if portal is None:
                raise PgError("34000", f'cursor "{stmt.name}" does not exist')
            portal.close()
            s.send(codec.command_complete("CLOSE CURSOR"))
    elif isinstance(stmt, statements.CopyTo):
        await _copy(s, stmt)
    elif isinstance(stmt, statements.CopyFrom):
        await copy_in(s, stmt)
    else:  # pragma: no cover - exhaustive
        raise AssertionError(stmt)


def _end_transaction(s: SessionHost) -> None:
    s.status = "I"
    _close_cursors(s)


def _close_cursors(s: SessionHost) -> None:
    for name in [n for n, p in s.portals.items() if p.cursor]:
        s.portals.pop(name).close()


def _show(s: SessionHost, name: str, *, describe: bool, formats: tuple[int, ...]) -> None:
    if name == "all":
        schema = pa.schema(
            [("name", pa.string()), ("setting", pa.string()), ("description", pa.string())]
        )
        rows: list[tuple[Any, ...]] = [(k, v, "") for k, v in sorted(s.vars.items())]
    else:
        if name not in s.vars:
            raise PgError("42704", f'unrecognized configuration parameter "{name}"')
        schema = pa.schema([(name, pa.string())])
        rows = [(s.vars[name],)]
    fmts = _fmts(formats, len(schema))
    if describe:
        s.send(codec.row_description(field_descs(schema), fmts))
    enc = RowEncoder(schema, fmts)
    for row in rows:
        s.send(enc.row(row))
    s.send(codec.command_complete("SHOW"))


def _fmts(formats: tuple[int, ...], n: int) -> list[int]:
    if not formats:
        return [0] * n
    if len(formats) == 1:
        return [formats[0]] * n
    return list(formats)


async def _declare(s: SessionHost, stmt: statements.Declare) -> None:
    if s.status == "I":
        raise PgError("25P01", "DECLARE CURSOR can only be used in transaction blocks")
    if stmt.name in s.portals:
        raise PgError("42P03", f'cursor "{stmt.name}" already exists')
    query = stmt.query  # the query's tokens: not split again
    portal = Portal(query.sql, (), cursor=True, parsed=query)
    await s.start_portal(portal)
    s.portals[stmt.name] = portal
    s.send(codec.command_complete("DECLARE CURSOR"))


async def _fetch(
    s: SessionHost, stmt: statements.Fetch, *, describe: bool, formats: tuple[int, ...]
) -> None:
    portal = s.portals.get(stmt.name)  # a DECLAREd cursor or a protocol portal (asyncpg)
    if portal is None:
        raise PgError("34000", f'cursor "{stmt.name}" does not exist')
    if not portal.ran:
        await s.start_portal(portal)
    if portal.schema is None:
        raise PgError("24000", f'cursor "{stmt.name}" does not return rows')
    fmts = _fmts(formats, len(portal.schema))
    if describe and not stmt.move:
        s.send(codec.row_description(field_descs(portal.schema), fmts))
    enc = RowEncoder(portal.schema, fmts)
    limit = stmt.count
    out: list[Any] = []
    timeout = None if stmt.timeout is None else statements.duration_seconds(stmt.timeout)
    if portal.rows is not None:
        end = len(portal.rows) if limit is None else min(len(portal.rows), portal.offset + limit)
        out = portal.rows[portal.offset : end]
        portal.offset = end
    elif portal.pump is not None and not portal.done:
        out = await _fetch_stream(s, portal, limit, timeout)
    if stmt.move:  # the rows are skipped
        s.send(codec.command_complete(f"MOVE {len(out)}"))
        return
    for row in out:
        s.send(enc.row(row))
    s.send(codec.command_complete(f"FETCH {len(out)}"))


async def _fetch_stream(
    s: SessionHost, portal: Portal, limit: int | None, timeout: float | None
) -> list[Any]:
    assert portal.pump is not None
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while not portal.pending:
        left = None if deadline is None else max(0.0, deadline - loop.time())
        if left == 0.0:
            ready = portal.pump.ready_rows()
            if ready is None:
                portal.done = True
            else:
                portal.pending.extend(ready)
            break
        try:
            rows = await s.wait_rows(portal, left)
        except TimeoutError:
            break
        if rows is None:
            portal.done = True
            break
        portal.pending.extend(rows)
    if not portal.done:
        ready = portal.pump.ready_rows()
        if ready is None:
            portal.done = True
        else:
            portal.pending.extend(ready)
    n = len(portal.pending) if limit is None else min(limit, len(portal.pending))
    return [portal.pending.popleft() for _ in range(n)]


async def _copy(s: SessionHost, stmt: statements.CopyTo) -> None:
    portal = Portal(stmt.query.sql, (), parsed=stmt.query)  # the query's tokens: not split again
    try:
        await s.start_portal(portal)
        if portal.schema is None:
            raise PgError("0A000", "COPY needs a statement that returns rows")
        enc = CopyEncoder(portal.schema, stmt.options)
        binary = int(stmt.options.format == "binary")
        s.send(codec.copy_out_response(len(portal.schema), binary))
        if start := enc.start():
            s.send(codec.copy_data(start))
        if portal.rows is not None:
            for row in portal.rows:
                s.send(codec.copy_data(enc.line(row)))
            n = len(portal.rows)
        else:
            n = await s.stream_rows(portal, lambda row: s.send(codec.copy_data(enc.line(row))), 0)
        if end := enc.end():
            s.send(codec.copy_data(end))
        s.send(codec.COPY_DONE)
        s.send(codec.command_complete(f"COPY {n}"))
    finally:
        portal.close()


async def _prepare(s: SessionHost, stmt: statements.Prepare) -> None:
    """SQL ``PREPARE name [(types)] AS statement``: a prepared statement as a Parse makes one
    (the same names: ``EXECUTE`` and the protocol's Bind both use it)."""
    if not stmt.name or stmt.name in s.prepared:
        raise PgError("42P05", f'prepared statement "{stmt.name}" already exists')
    oids = tuple(_type_oid(t) for t in stmt.param_types)
    parsed = stmt.statement  # the statement's tokens, as the PREPARE was split: kept
    prepared = Prepared(parsed.sql, oids, parsed=parsed)
    prepared.described = await s.describe_prepared(prepared)  # errors now, as PostgreSQL's
    s.prepared[stmt.name] = prepared
    s.send(codec.command_complete("PREPARE"))


def _param_type(oid: int) -> PgType:
    """The SQL layer's type of a parameter of type ``oid`` (``text`` for one it has not)."""
    try:
        return named_type(cast_name(pgt.BY_OID.get(oid)) or "text")
    except KeyError:
        return named_type("text")


def _type_oid(name: str) -> int:
    base = name.split("(")[0].strip()
    try:
        t = named_type(base)
    except KeyError:
        raise PgError("42704", f'type "{name}" does not exist') from None
    pg = pgt.BY_NAME.get(t.name)
    return pg.oid if pg is not None else pgt.TEXT.oid


async def _execute(
    s: SessionHost, stmt: statements.Execute, *, describe: bool, formats: tuple[int, ...]
) -> None:
    """SQL ``EXECUTE name (args)``: the prepared statement's tokens planned with each
    argument cast to its parameter's type (:attr:`spate.sql.Parsed.arguments`); no text is
    made of them."""
    prepared = s.prepared.get(stmt.name)
    if prepared is None:
        raise PgError("26000", f'prepared statement "{stmt.name}" does not exist')
    if prepared.described is None:
        prepared.described = await s.describe_prepared(prepared)
    oids = prepared.described.param_oids
    if len(stmt.args) != len(oids):
        raise PgError(
            "42601",
            f'wrong number of parameters for prepared statement "{stmt.name}": '
            f"expected {len(oids)}, got {len(stmt.args)}",
        )
    parsed = prepared.parsed
    assert parsed is not None  # PREPARE takes a statement
    arguments = tuple(
        Argument(arg, _param_type(oid)) for arg, oid in zip(stmt.args, oids, strict=True)
    )
    bound = Parsed(parsed.source, parsed.tokens, arguments)
    portal = Portal(bound.sql, formats, parsed=bound)
    try:
        await s.run_portal(portal, describe=describe)
    finally:
        portal.close()
