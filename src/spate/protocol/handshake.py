"""The authenticated handshake, as pure functions and messages (no sockets here).

Every connection starts with four frames, before any command is decoded::

    client → server   ClientHello{version, build, role, epoch, nonce_c}
    server → client   ServerHello{version, build, nonce_s}
    client → server   ClientProof{mac_c}
    server → client   ServerVerdict{code, reason, current_epoch, mac_s}

``transcript = SHA-256(len ‖ ClientHello frame body ‖ len ‖ ServerHello frame body)`` covers
both fresh 32-byte nonces, the role, the epoch and both versions, exactly as sent.
``mac_c = HMAC-SHA256(secret, "spate/1/client" ‖ transcript)`` proves the client knows the
shared secret; the server answers only after checking it (so it never computes a MAC for an
unauthenticated peer) with ``mac_s = HMAC-SHA256(secret, "spate/1/server" ‖ transcript ‖
verdict)``, which proves the server knows it too and binds the verdict. MACs are compared with
``hmac.compare_digest``. A replayed transcript fails because the other side's nonce is new.

Without a secret (allowed only on loopback, or when TLS client certificates authenticate the
peers) the MACs are empty and not checked; a side that has a secret MUST reject an empty MAC.
A failed proof closes the connection after a verdict that says only "authentication failed"
(not MAC'd: the server computes no MAC for a peer that has not proven the secret). Refusals
after a valid proof (role, version, epoch) carry the server's MAC.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass
from typing import Final, Literal

from spate.wire import wire

Role = Literal["compute", "storage"]
"""Which protocol a connection speaks: controller ⇄ compute replica, or ⇄ storage replica."""

NONCE_BYTES: Final = 32
HANDSHAKE_TIMEOUT_S: Final = 5.0
"""Default time allowed for the whole handshake (TLS included) before the connection closes."""

_CLIENT_LABEL: Final = b"spate/1/client"
_SERVER_LABEL: Final = b"spate/1/server"


@wire("transport.client_hello")
@dataclass(frozen=True, slots=True)
class ClientHello:
    """First frame of a connection, from the controller.

    ``nonce`` MUST be 32 fresh random bytes. ``epoch`` is the controller's epoch for this
    replica; the replica refuses an epoch not newer than one it has accepted.
    """

    version: int
    build: str
    role: Role
    epoch: int
    nonce: bytes


@wire("transport.server_hello")
@dataclass(frozen=True, slots=True)
class ServerHello:
    """The replica's answer: its version and its own fresh 32-byte nonce."""

    version: int
    build: str
    nonce: bytes


@wire("transport.client_proof")
@dataclass(frozen=True, slots=True)
class ClientProof:
    """The controller's proof that it knows the shared secret (empty without a secret)."""

    mac: bytes


VerdictCode = Literal["ok", "auth", "version", "role", "epoch"]


@wire("transport.server_verdict")
@dataclass(frozen=True, slots=True)
class ServerVerdict:
    """Accepted (``code == "ok"``), or refused with a reason; with the server's proof.

    ``current_epoch`` is the newest epoch the replica has accepted (the client's own when
    accepted). After a refusal the server closes the connection.
    """

    code: VerdictCode
    reason: str
    current_epoch: int
    mac: bytes

    @property
    def accepted(self) -> bool:
        return self.code == "ok"


def transcript(client_hello: bytes | memoryview, server_hello: bytes | memoryview) -> bytes:
    """The digest both MACs cover: the two hello frame bodies, length-prefixed."""
    h = hashlib.sha256()
    for part in (client_hello, server_hello):
        h.update(struct.pack(">I", len(part)))
        h.update(part)
    return h.digest()


def client_mac(secret: bytes | None, transcript_digest: bytes) -> bytes:
    if secret is None:
        return b""
    return hmac.new(secret, _CLIENT_LABEL + transcript_digest, hashlib.sha256).digest()


def server_mac(
    secret: bytes | None,
    transcript_digest: bytes,
    *,
    code: str,
    reason: str,
    current_epoch: int,
) -> bytes:
    if secret is None:
        return b""
    verdict = b"\0".join([code.encode(), struct.pack(">Q", current_epoch), reason.encode()])
    return hmac.new(secret, _SERVER_LABEL + transcript_digest + verdict, hashlib.sha256).digest()


def mac_ok(secret: bytes | None, expected: bytes, got: bytes) -> bool:
    """Constant-time check; with a secret an empty MAC never passes."""
    if secret is None:
        return True
    return len(got) > 0 and hmac.compare_digest(expected, got)


def signed_verdict(
    code: VerdictCode, reason: str, current_epoch: int, *, secret: bytes | None, digest: bytes
) -> ServerVerdict:
    """A verdict carrying the server's MAC (only after the client's proof verified)."""
    mac = server_mac(secret, digest, code=code, reason=reason, current_epoch=current_epoch)
    return ServerVerdict(code, reason, current_epoch, mac)


def verdict_ok(verdict: ServerVerdict, *, secret: bytes | None, digest: bytes) -> bool:
    """The verdict's MAC proves the server knows the secret."""
    expected = server_mac(
        secret,
        digest,
        code=verdict.code,
        reason=verdict.reason,
        current_epoch=verdict.current_epoch,
    )
    return mac_ok(secret, expected, verdict.mac)
