"""Errors of the protocol layer: framing, handshake, epochs and connections.

* :class:`ConnectFailed` — no connection could be established (refused, unreachable, timed
  out). Determinate: nothing was sent. Safe to retry (:func:`~spate.protocol.transport.
  connect_retrying` does).
* :class:`ConnectionClosed` — the peer went away, closed the connection, or was silent for
  longer than the read timeout. Indeterminate: a message sent just before may or may not have
  arrived. Both are also ``ConnectionError``.
* :class:`TruncatedFrame` — the stream ended inside a frame; both of the above.
* :class:`AuthenticationFailed` — the handshake failed: wrong or missing secret, a replayed or
  truncated transcript, another protocol version, a handshake timeout. Not retried.
* :class:`EpochRefused` — the replica already accepted a newer (or equal) controller epoch.
* :class:`FrameTooLarge` — a frame's length prefix exceeds the maximum (checked before the
  body is read).
* :class:`InsecureBind` — a server asked to listen on a non-loopback address without a secret
  or TLS.

Framing, decoding and stage violations raise :class:`~spate.errors.ProtocolError` (the root's),
and the connection is closed.
"""

from __future__ import annotations

from spate.errors import Determinate, Indeterminate, ProtocolError, UsageError


class ConnectFailed(Determinate, ConnectionError):
    """No connection to ``peer`` could be established; nothing was sent."""


class ConnectionClosed(Indeterminate, ConnectionError):
    """The connection is closed (by the peer, by us, or after a read timeout)."""


class TruncatedFrame(ConnectionClosed, ProtocolError):
    """The stream ended inside a frame: the peer went away (``ConnectionClosed``) *and* sent
    a malformed frame (``ProtocolError``)."""


class AuthenticationFailed(ProtocolError):
    """The peer did not complete the authenticated handshake. Nothing was executed."""


class EpochRefused(ProtocolError):
    """The replica refuses ``epoch`` because it already accepted ``current``."""

    def __init__(self, epoch: int, current: int, peer: str = "") -> None:
        self.epoch = epoch
        self.current = current
        where = f" by {peer}" if peer else ""
        super().__init__(
            f"controller epoch {epoch} refused{where}: it already accepted epoch {current}"
        )


class FrameTooLarge(ProtocolError):
    """A frame announced a body longer than the connection's maximum."""

    def __init__(self, length: int, maximum: int, *, authenticated: bool) -> None:
        self.length = length
        self.maximum = maximum
        stage = "" if authenticated else " before authentication"
        super().__init__(f"frame of {length} bytes exceeds the maximum of {maximum}{stage}")


class InsecureBind(UsageError, ValueError):
    """Refusing to listen on a non-loopback address without a secret or TLS."""
