"""FrameStream parsing: any chunking of the byte stream gives the same frames; limits first."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spate.errors import ProtocolError
from spate.protocol.errors import ConnectionClosed, FrameTooLarge, TruncatedFrame
from spate.protocol.frame import HEADER, MAGIC, Frame, FrameKind, encode_frame
from spate.protocol.stream import FrameStream


def feed_in_chunks(stream: FrameStream, data: bytes, cuts: list[int]) -> None:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for a, b in itertools.pairwise(points):
        stream.feed(data[a:b])


@settings(max_examples=60)
@given(
    st.lists(st.integers(0, 700_000), min_size=1, max_size=5),
    st.lists(st.integers(0, 2**21), max_size=12),
)
def test_any_chunking_gives_the_same_frames(sizes: list[int], cuts: list[int]) -> None:
    bodies = [os.urandom(n) if n < 1000 else bytes([n % 251]) * n for n in sizes]
    data = b"".join(encode_frame(b) for b in bodies) + encode_frame(b"", FrameKind.KEEPALIVE)
    stream = FrameStream(max_body=1 << 20, authenticated=True)
    feed_in_chunks(stream, data, cuts)
    stream.connection_lost(None)
    items = stream.frames_ready()
    assert [bytes(f.body) for f in items[:-2] if isinstance(f, Frame)] == bodies
    assert items[-2] == Frame(FrameKind.KEEPALIVE, b"")
    assert isinstance(items[-1], ConnectionClosed) and not isinstance(items[-1], ProtocolError)


def test_length_is_checked_before_the_body_arrives() -> None:
    stream = FrameStream(max_body=1000, authenticated=False)
    stream.feed(HEADER.pack(MAGIC, 1, 0, 1001))  # only the header: no body sent
    (error,) = stream.frames_ready()
    assert isinstance(error, FrameTooLarge)
    assert "1001 bytes exceeds the maximum of 1000 before authentication" in str(error)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"XX\x01\x00\x00\x00\x00\x00", "bad magic"),
        (b"SP\x02\x00\x00\x00\x00\x00", "unknown frame version 2"),
        (b"SP\x01\x07\x00\x00\x00\x00", "unknown frame kind 7"),
        (b"SP\x01\x01\x00\x00\x00\x02ab", "keepalive with a 2-byte body"),
    ],
)
def test_bad_headers(data: bytes, message: str) -> None:
    stream = FrameStream(max_body=100, authenticated=True)
    stream.feed(encode_frame(b"ok") + data)
    ok, error = stream.frames_ready()
    assert ok == Frame(FrameKind.MESSAGE, b"ok")
    assert isinstance(error, ProtocolError) and message in str(error)
    assert "offset 10" in str(error)


@pytest.mark.parametrize("cut", [3, 8, 9, 300_000])
def test_truncated_frames(cut: int) -> None:
    stream = FrameStream(max_body=1 << 20, authenticated=True)
    stream.feed(encode_frame(b"z" * 400_000)[:cut])
    stream.connection_lost(None)
    (error,) = stream.frames_ready()
    assert isinstance(error, TruncatedFrame)
    assert isinstance(error, ProtocolError) and isinstance(error, ConnectionClosed)
