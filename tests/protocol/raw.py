"""Raw peers for security and fuzz tests: they write arbitrary bytes instead of messages."""

from __future__ import annotations

import asyncio

from spate.codec import decode, encode
from spate.protocol.errors import ConnectionClosed
from spate.protocol.frame import encode_frame
from spate.protocol.handshake import ServerVerdict
from spate.protocol.stream import FrameStream
from spate.protocol.transport import client_handshake


async def open_raw(port: int) -> FrameStream:
    _, stream = await asyncio.get_running_loop().create_connection(FrameStream, "127.0.0.1", port)
    return stream


async def authenticated_raw(
    port: int, secret: bytes | None, epoch: int, role: str = "compute"
) -> FrameStream:
    """A raw stream past a real handshake: whatever is written next is post-auth traffic."""
    stream = await open_raw(port)
    await client_handshake(stream, role=role, epoch=epoch, key=secret, peer="raw")  # type: ignore[arg-type]
    return stream


async def closed_by_peer(stream: FrameStream, within: float) -> bool:
    """True if the peer closes within ``within`` seconds (frames it sent are skipped)."""
    try:
        async with asyncio.timeout(within):
            while True:
                await stream.read_frame()
    except TimeoutError:
        return False
    except ConnectionClosed:
        return True


async def read_verdict_after_hello(stream: FrameStream) -> ServerVerdict:
    await stream.read_frame()
    frame = await stream.read_frame()
    return decode(frame.body, ServerVerdict)


def frame_of(message: object) -> bytes:
    return encode_frame(encode(message))
