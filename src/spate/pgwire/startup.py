"""The start of a connection: SSLRequest (then TLS), the startup packet, authentication.

Trust is given only to loopback peers and only when no password is configured; otherwise the
client MUST complete SCRAM-SHA-256. A failed authentication is answered ``28P01`` (FATAL)
without saying why, and logged without the password.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

from spate.pgwire import codec, guc, statements
from spate.pgwire.auth import MECHANISM, AuthFailed, ScramExchange, is_loopback
from spate.pgwire.errors import PgError
from spate.pgwire.host import Connection
from spate.plan.recursive import DEFAULT_MAX_ITERATIONS

log = logging.getLogger(__name__)

STARTUP_LIMIT: Final = 10_000


def version_num(version: str) -> str:
    """PostgreSQL's ``server_version_num`` of ``version``: ``15.4`` → ``150004``, ``9.5.0`` →
    ``90500``."""
    parts = [int(p) for p in version.split()[0].split(".") if p.isdigit()] + [0, 0]
    if parts[0] >= 10:
        return str(parts[0] * 10000 + parts[1])
    return str(parts[0] * 10000 + parts[1] * 100 + parts[2])


def default_vars(
    user: str,
    database: str,
    application: str,
    version: str,
    cluster: str = "default",
    *,
    statement_timeout: str = "0",
) -> dict[str, str]:
    return {
        "server_version": version,
        "server_version_num": version_num(version),
        "server_encoding": "UTF8",
        "client_encoding": "UTF8",
        "datestyle": "ISO, MDY",
        "intervalstyle": "postgres",
        "timezone": "UTC",
        "integer_datetimes": "on",
        "standard_conforming_strings": "on",
        "application_name": application,
        "is_superuser": "off",
        "session_authorization": user,
        "transaction_isolation": "strict serializable",
        "default_transaction_isolation": "strict serializable",
        "real_time_recency": "off",
        "recursion_limit": str(DEFAULT_MAX_ITERATIONS),
        "search_path": "public",
        "cluster": cluster,
        "database": database,
        "user": user,
        "extra_float_digits": "3",
        "max_identifier_length": "63",
        "lc_collate": "C",
        "lc_ctype": "C",
        "jit": "off",
        "default_table_access_method": "heap",
        "statement_timeout": statement_timeout,
    }


DISPLAY: Final = {
    "datestyle": "DateStyle",
    "intervalstyle": "IntervalStyle",
    "timezone": "TimeZone",
}


async def handshake(s: Connection) -> bool:
    """SSL negotiation, the startup packet, authentication, the session's parameters.

    ``False`` when the connection was only a CancelRequest (or was refused). The whole of it
    must be over within ``startup_timeout`` seconds (PostgreSQL's ``authentication_timeout``):
    a client that sends nothing, or its startup a byte at a time, is closed then, so silent
    sockets cannot hold the server's connections.
    """
    try:
        async with asyncio.timeout(s.options.startup_timeout):
            return await _handshake(s)
    except TimeoutError:
        log.info("closing a connection from %s: startup took over %ss", s.peer,
                 s.options.startup_timeout)  # fmt: skip
        with contextlib.suppress(ConnectionError, RuntimeError):
            # written, never waited for: the client may not be reading
            s.writer.write(
                codec.error_response("FATAL", "57014", "canceling authentication due to timeout")
            )
        return False


async def _handshake(s: Connection) -> bool:
    ssl_done = False
    while True:
        head = await s.read_exact(4)
        size = codec.check_length(
            int.from_bytes(head, "big", signed=True), limit=STARTUP_LIMIT, what="startup"
        )
        packet = codec.parse_startup(await s.read_exact(size))
        if isinstance(packet, codec.CancelKey):
            s.cancel_other(packet.pid, packet.secret)
            return False
        if isinstance(packet, codec.SslRequest):
            ctx = s.options.ssl_context
            if packet.gss or ctx is None or ssl_done:
                s.writer.write(b"N")
                await s.writer.drain()
                continue
            if s.buffered():
                # bytes sent before the handshake would be read as if they came over TLS
                # (a man-in-the-middle's injection): refuse them, as PostgreSQL does
                await s.fatal("08P01", "received unencrypted data after SSL request")
                return False
            s.writer.write(b"S")
            await s.writer.drain()
            await s.writer.start_tls(ctx)
            ssl_done = True
            continue
        break
    params = packet.params
    if packet.version & 0xFFFF or any(k.startswith("_pq_.") for k in params):
        s.send(codec.negotiate_version(0, [k for k in params if k.startswith("_pq_.")]))
    user = params.get("user", "")
    if not user:
        await s.fatal("28000", "no user name in the startup packet")
        return False
    if s.options.admit is not None and not s.options.admit():
        await s.fatal("53300", "sorry, too many clients already (too many connections)")
        return False
    await _authenticate(s, user)
    s.vars.update(
        default_vars(
            user,
            params.get("database", user),
            params.get("application_name", ""),
            s.options.server_version,
            s.options.default_cluster(),
            statement_timeout=guc.show_ms(s.options.statement_timeout_ms),
        )
    )
    for name in sorted(statements.REPORTED):
        s.send(codec.parameter_status(DISPLAY.get(name, name), s.vars[name]))
    s.send(codec.backend_key(s.pid, s.secret))
    s.send(codec.ready("I"))
    await s.flush()
    return True


async def _authenticate(s: Connection, user: str) -> None:
    verifier = s.options.verifier
    if verifier is None:
        if not is_loopback(s.peer):
            raise PgError("28000", "no password is configured: only loopback clients are trusted")
        s.send(codec.AUTH_OK)
        return
    s.send(codec.auth_request(10, codec.cstr(MECHANISM) + b"\0"))
    await s.flush()
    exchange = ScramExchange(verifier)
    try:
        kind, body = await s.read_message()
        if kind != b"p":
            raise AuthFailed("expected a SASL response")
        mech, data = codec.parse_sasl_initial(body)
        if mech != MECHANISM:
            raise AuthFailed(f"unsupported SASL mechanism {mech!r}")
        s.send(codec.auth_request(11, exchange.first(data)))
        await s.flush()
        kind, body = await s.read_message()
        if kind != b"p":
            raise AuthFailed("expected a SASL response")
        s.send(codec.auth_request(12, exchange.final(body)))
    except (AuthFailed, codec.MalformedMessage):
        log.info("password authentication failed for user %r from %s", user, s.peer)
        raise PgError(
            "28P01", f'password authentication failed for user "{user}"', fatal=True
        ) from None
    s.send(codec.AUTH_OK)
