"""Unauthenticated peers cost a replica little: a pre-auth frame is at most a few KiB, few
connections may handshake at once, and each has a bounded time to authenticate. The connected
controller is served throughout."""

from __future__ import annotations

import asyncio

from spate.protocol.connection import TransportOptions
from spate.protocol.frame import HEADER, MAGIC
from spate.protocol.transport import connect, serve
from tests.protocol.raw import closed_by_peer, open_raw
from tests.protocol.test_transport import HELLO, Recorder

LIMITED = TransportOptions(handshake_timeout=1.0, max_unauthenticated=8)


async def test_a_pre_auth_frame_of_more_than_a_few_kib_is_refused(secret: bytes) -> None:
    rec = Recorder()
    async with await serve(
        "127.0.0.1", 0, role="compute", secret=secret, handler=rec, options=LIMITED
    ) as server:
        raw = await open_raw(server.port)
        raw.write_raw(HEADER.pack(MAGIC, 1, 0, 64 * 1024))
        assert await closed_by_peer(raw, within=0.5)
        raw.close()
        assert rec.commands == []


async def test_unauthenticated_connections_beyond_the_cap_are_closed_at_once(
    secret: bytes,
) -> None:
    rec = Recorder()
    async with await serve(
        "127.0.0.1", 0, role="compute", secret=secret, handler=rec, options=LIMITED
    ) as server:
        controller = await connect("127.0.0.1", server.port, role="compute", epoch=1, secret=secret)
        silent = [await open_raw(server.port) for _ in range(20)]
        closed = await asyncio.gather(*(closed_by_peer(s, within=0.3) for s in silent))
        assert sum(closed) == 12  # the 8 admitted still have their handshake time
        assert server.stats.shed == 12
        # The authenticated controller is served while they wait.
        await controller.send(HELLO)
        await asyncio.sleep(0.1)
        assert rec.commands == [HELLO]
        # The admitted ones are closed when their handshake time runs out.
        assert all(await asyncio.gather(*(closed_by_peer(s, within=2.0) for s in silent[:8])))
        for s in silent:
            s.close()
        # And the slots are free again: a new controller authenticates.
        newer = await connect("127.0.0.1", server.port, role="compute", epoch=2, secret=secret)
        await newer.close()
        await controller.close()
