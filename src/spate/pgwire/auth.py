"""Authentication: trust on loopback, SCRAM-SHA-256 (RFC 5802/7677) otherwise (no I/O).

The server keeps a :class:`ScramVerifier` (salt, iteration count, StoredKey, ServerKey) derived
once from the configured password; the password itself is not kept. :class:`ScramExchange`
runs one client's exchange: ``first(client_first) -> server_first``, then
``final(client_final) -> server_final`` or :class:`AuthFailed`. Channel binding is not offered
(``n`` and ``y`` GS2 flags only).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from spate.errors import UsageError

MECHANISM: Final = "SCRAM-SHA-256"
ITERATIONS: Final = 4096


class AuthFailed(UsageError, PermissionError):
    """A client failed to authenticate (28P01); the message never contains the password."""


class AuthConfigError(UsageError, ValueError):
    """The server's authentication settings are unusable (no password for a public listen)."""


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def read_password(*, file: Path | None, env: str | None) -> str | None:
    """The password from ``file`` (its first line) or the environment variable ``env``."""
    if file is not None:
        try:
            text = file.read_text()
        except OSError as e:
            raise AuthConfigError(f"cannot read the password file {file}: {e.strerror}") from None
        pw = text.splitlines()[0] if text.strip() else ""
        if not pw:
            raise AuthConfigError(f"the password file {file} is empty")
        return pw
    if env is not None:
        pw = os.environ.get(env, "")
        if not pw:
            raise AuthConfigError(f"the environment variable {env} holds no password")
        return pw
    return None


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class ScramVerifier:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @staticmethod
    def from_password(password: str, *, salt: bytes | None = None) -> ScramVerifier:
        salt = salt if salt is not None else secrets.token_bytes(16)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, ITERATIONS)
        client_key = _hmac(salted, b"Client Key")
        return ScramVerifier(
            salt,
            ITERATIONS,
            hashlib.sha256(client_key).digest(),
            _hmac(salted, b"Server Key"),
        )


def _attrs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise AuthFailed("malformed SCRAM message")
        out[part[0]] = part[2:]
    return out


class ScramExchange:
    """One SCRAM-SHA-256 exchange, server side."""

    def __init__(self, verifier: ScramVerifier, *, nonce: str | None = None) -> None:
        self._v = verifier
        self._server_nonce = nonce or base64.b64encode(secrets.token_bytes(18)).decode()
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def first(self, client_first: bytes) -> bytes:
        try:
            text = client_first.decode()
        except UnicodeDecodeError:
            raise AuthFailed("malformed SCRAM message") from None
        gs2, _, rest = text.partition(",")
        if gs2 not in ("n", "y"):
            raise AuthFailed("SCRAM channel binding is not supported by this server")
        authzid, _, bare = rest.partition(",")
        if authzid:
            raise AuthFailed("SCRAM authorization identities are not supported")
        attrs = _attrs(bare)
        if "r" not in attrs:
            raise AuthFailed("malformed SCRAM message: no nonce")
        self._client_first_bare = bare
        self._nonce = attrs["r"] + self._server_nonce
        salt = base64.b64encode(self._v.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._v.iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        try:
            text = client_final.decode()
        except UnicodeDecodeError:
            raise AuthFailed("malformed SCRAM message") from None
        without_proof, _, proof_part = text.rpartition(",")
        attrs = _attrs(text)
        if not proof_part.startswith("p=") or attrs.get("r") != self._nonce:
            raise AuthFailed("SCRAM nonce or proof missing or wrong")
        if attrs.get("c") not in ("biws", "eSws"):
            raise AuthFailed("SCRAM channel binding data is not supported")
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, without_proof)
        ).encode()
        try:
            proof = base64.b64decode(attrs["p"], validate=True)
        except ValueError:
            raise AuthFailed("malformed SCRAM proof") from None
        signature = _hmac(self._v.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthFailed("password authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self._v.stored_key):
            raise AuthFailed("password authentication failed")
        server_sig = _hmac(self._v.server_key, auth_message)
        return b"v=" + base64.b64encode(server_sig)
