"""The fast decoders of Bind, Execute and Describe/Close give exactly what the field-by-field
:class:`~spate.pgwire.codec.Reader` gives: the same message, or the same MalformedMessage."""

from __future__ import annotations

import random
import struct

import pytest

from spate.pgwire import codec


def _bind_body(rng: random.Random) -> bytes:
    def name() -> bytes:
        return rng.choice([b"", b"p1", "é".encode(), b"_pg3_0"]) + b"\0"

    def formats() -> bytes:
        n = rng.choice([0, 1, 2, 3, 9])
        return struct.pack("!H", n) + b"".join(
            struct.pack("!h", rng.choice([0, 1, 0, 1, 2, -1])) for _ in range(n)
        )

    values = b""
    n = rng.choice([0, 1, 2, 5])
    for _ in range(n):
        v = rng.choice([None, b"", b"42", b"\x00\x00\x00\x00\x00\x00\x00\x07"])
        values += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    return name() + name() + formats() + struct.pack("!H", n) + values + formats()


def _outcome(parse: object, body: bytes) -> object:
    try:
        return parse(body)  # type: ignore[operator]
    except codec.MalformedMessage as e:
        return ("malformed", str(e))


def test_bind_fast_path_matches_the_checked_decoder() -> None:
    seed = random.SystemRandom().randrange(2**32)
    print(f"seed {seed}; replay: set seed = {seed} in this test")
    rng = random.Random(seed)
    for _ in range(3000):
        body = _bind_body(rng)
        cut = rng.random()
        if cut < 0.3:
            body = body[: rng.randrange(len(body) + 1)]
        elif cut < 0.4:
            at = rng.randrange(len(body)) if body else 0
            body = body[:at] + bytes([rng.randrange(256)]) + body[at + 1 :]
        elif cut < 0.5:
            body += b"\0"
        got = _outcome(codec.parse_bind, body)
        want = _outcome(codec._bind_checked, body)
        assert got == want, (seed, body)


def test_bind_fast_path_decodes_a_usual_bind() -> None:
    body = b"\0\0" + struct.pack("!HhH", 1, 1, 1) + struct.pack("!i", 8) + bytes(7) + b"\x07"
    body += struct.pack("!Hh", 1, 1)
    assert codec.parse_bind(body) == codec.Bind("", "", (1,), (bytes(7) + b"\x07",), (1,))


@pytest.mark.parametrize(
    "body", [b"\0\0\0\0\0", b"\0\0\0\0\x05", b"p\0\0\0\0\0", b"\0\0\0\0", b"\0\0\0\0\0\0"]
)
def test_execute_matches_the_checked_decoder(body: bytes) -> None:
    def checked(b: bytes) -> codec.Execute:
        r = codec.Reader(b, "Execute")
        portal, max_rows = r.cstr(), r.int32()
        r.end()
        return codec.Execute(portal, max_rows)

    assert _outcome(codec.parse_execute, body) == _outcome(checked, body)


@pytest.mark.parametrize("body", [b"P\0", b"S\0", b"Pp\0", b"X\0", b"P", b"P\0\0"])
def test_target_matches_the_checked_decoder(body: bytes) -> None:
    def checked(b: bytes) -> codec.Target:
        r = codec.Reader(b, "Describe")
        kind, name = r.byte(), r.cstr()
        r.end()
        if kind not in ("S", "P"):
            raise codec.MalformedMessage(f"Describe: target kind {kind!r} is neither 'S' nor 'P'")
        return codec.Target(kind, name)

    assert _outcome(lambda b: codec.parse_target(b, "Describe"), body) == _outcome(checked, body)
