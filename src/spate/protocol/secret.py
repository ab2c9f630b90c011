"""A secret value that never shows itself in ``repr``, ``str``, logs or tracebacks.

``Secret`` wraps a string (a shared transport secret, a PostgreSQL connection string with a
password). It travels on the (authenticated) wire as a registered type, prints as
``Secret('**********')``, and gives its value only through :meth:`Secret.reveal`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from spate.wire import wire

MIN_SHARED_SECRET_BYTES: Final = 32
"""A transport secret shorter than this is refused (``secrets.token_bytes(32)`` or longer)."""

_MASK: Final = "**********"


@wire("common.secret")
@dataclass(frozen=True, slots=True)
class Secret:
    """A redacted string. Equality compares values; printing never shows it."""

    value: str = field(repr=False)

    def reveal(self) -> str:
        return self.value

    def encode(self) -> bytes:
        return self.value.encode()

    def __str__(self) -> str:
        return _MASK

    def __repr__(self) -> str:
        return f"Secret({_MASK!r})"

    def __format__(self, spec: str) -> str:
        return _MASK

    @classmethod
    def generate(cls) -> Secret:
        """A fresh random transport secret (32 random bytes, hex)."""
        return cls(secrets.token_hex(MIN_SHARED_SECRET_BYTES))

    @classmethod
    def from_file(cls, path: Path | str) -> Secret:
        """The secret stored in ``path`` (surrounding whitespace removed)."""
        return cls(Path(path).read_text().strip())


_REF_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


@wire("common.secret_ref")
@dataclass(frozen=True, slots=True)
class SecretRef:
    """A secret kept outside the catalog and consensus, by id: durable descriptions (the
    catalog, the storage controller's metadata, command histories) hold this, and the replica
    that uses the connection reads the value from its secrets directory
    (:class:`spate.storage.secrets.SecretsDir`)."""

    id: str

    def __post_init__(self) -> None:
        if not _REF_ID.fullmatch(self.id):
            raise ValueError(f"secret reference id {self.id!r} is not [A-Za-z0-9_-]{{1,128}}")

    def reveal(self) -> str:
        raise LookupError(
            f"secret {self.id} was not resolved: the replica reads it from its secrets "
            "directory (--secrets-dir) before using the connection"
        )


def secret_bytes(secret: object) -> bytes | None:
    """The raw bytes of a transport secret given as ``Secret``, ``SecretStr``/``SecretBytes``
    (pydantic), ``str``, ``bytes`` or ``None``.

    Raises ``ValueError`` (without showing the secret) when it is shorter than
    :data:`MIN_SHARED_SECRET_BYTES`, and ``TypeError`` for anything else.
    """
    if secret is None:
        return None
    raw: object = secret
    if isinstance(raw, Secret):
        raw = raw.encode()
    elif hasattr(raw, "get_secret_value"):  # pydantic SecretStr / SecretBytes
        raw = raw.get_secret_value()
    if isinstance(raw, str):
        raw = raw.encode()
    if not isinstance(raw, bytes):
        raise TypeError(f"a secret must be Secret, SecretStr, str or bytes, not {type(secret)}")
    if len(raw) < MIN_SHARED_SECRET_BYTES:
        raise ValueError(
            f"transport secret is {len(raw)} bytes; at least {MIN_SHARED_SECRET_BYTES} required"
        )
    return raw
