"""A minimal raw protocol client for robustness tests (no driver in the way)."""

from __future__ import annotations

import socket
import struct


def startup_packet(user: str = "fuzzer") -> bytes:
    body = struct.pack("!i", 196608) + b"user\0" + user.encode() + b"\0database\0spate\0\0"
    return struct.pack("!i", len(body) + 4) + body


def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def read_message(sock: socket.socket) -> tuple[bytes, bytes] | None:
    head = _read(sock, 5)
    if head is None:
        return None
    (length,) = struct.unpack("!i", head[1:])
    body = _read(sock, length - 4)
    return (head[:1], body) if body is not None else None


def _read(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def connect(port: int, timeout: float = 5.0) -> socket.socket:
    """A connection past startup (trust), with ReadyForQuery read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(startup_packet())
    until(sock, b"Z")
    return sock


def until(sock: socket.socket, kind: bytes) -> list[tuple[bytes, bytes]]:
    """Messages up to and including the first of ``kind``; raises EOFError if the server closes."""
    out = []
    while True:
        m = read_message(sock)
        if m is None:
            raise EOFError(f"closed before {kind!r}; got {[k for k, _ in out]}")
        out.append(m)
        if m[0] == kind:
            return out


def error_code(body: bytes) -> str:
    for field in body.split(b"\0"):
        if field[:1] == b"C":
            return field[1:].decode()
    return ""


def parse_msg(query: str, name: str = "", oids: tuple[int, ...] = ()) -> bytes:
    body = name.encode() + b"\0" + query.encode() + b"\0" + struct.pack("!h", len(oids))
    body += b"".join(struct.pack("!I", o) for o in oids)
    return message(b"P", body)


def bind_msg(values: list[bytes | None], portal: str = "", stmt: str = "") -> bytes:
    body = portal.encode() + b"\0" + stmt.encode() + b"\0" + struct.pack("!h", 0)
    body += struct.pack("!h", len(values))
    for v in values:
        body += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    body += struct.pack("!h", 0)
    return message(b"B", body)
