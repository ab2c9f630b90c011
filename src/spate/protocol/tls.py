"""TLS contexts for the transport: mutual TLS with a private CA.

Both sides require TLS 1.2 or newer and verify the peer against ``cafile``; the server
requires a client certificate (``CERT_REQUIRED``) unless told otherwise. TLS protects the
connection's confidentiality and integrity; the HMAC handshake still runs inside it when a
secret is configured.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from spate.protocol.secret import Secret


def server_tls_context(
    certfile: Path | str,
    keyfile: Path | str,
    cafile: Path | str,
    *,
    require_client_cert: bool = True,
) -> ssl.SSLContext:
    """A server context presenting ``certfile`` and verifying clients against ``cafile``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(certfile), str(keyfile))
    ctx.load_verify_locations(cafile=str(cafile))
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_NONE
    return ctx


def client_tls_context(
    cafile: Path | str,
    *,
    certfile: Path | str | None = None,
    keyfile: Path | str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client context verifying the server against ``cafile``, presenting ``certfile``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(cafile=str(cafile))
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if certfile is not None:
        ctx.load_cert_chain(str(certfile), None if keyfile is None else str(keyfile))
    return ctx


@dataclass(frozen=True, slots=True)
class PeerAuth:
    """How a controller authenticates to one replica: the shared ``secret`` (``None``: none),
    and a client TLS context (``None``: plain TCP). Replaces the connector's defaults for a
    replica placed elsewhere."""

    secret: Secret | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False)
