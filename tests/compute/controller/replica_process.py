"""A scripted compute replica as a real process on TCP loopback (a test double of the
compute replica, for process-level controller tests).

    python -m tests.compute.controller.replica_process --port P   # secret in SPATE_TEST_SECRET

It listens on ``127.0.0.1:P`` with the authenticated TCP transport, prints ``ready <port>``,
and runs a :class:`ScriptedReplica` whose upper follows the wall clock: every 20 ms its indexes
report ``upper = milliseconds since 2020-01-01 // 10`` (the same on every replica process, so
two replicas report the same frontiers), and peeks below the upper are answered with
``rows_at(timestamp)``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time

from spate.protocol.errors import ConnectionClosed
from spate.protocol.transport import TcpTransport

from .fake_replica import ScriptedReplica, rows_at

EPOCH_2020_MS = 1_577_836_800_000


def clock_upper() -> int:
    return (time.time_ns() // 1_000_000 - EPOCH_2020_MS) // 10


async def main(port: int) -> None:
    rows_at(0)  # pyarrow's first table imports pandas (~1 s): pay it before serving
    replica = ScriptedReplica(upper=clock_upper())
    secret = os.environ["SPATE_TEST_SECRET"].encode()
    server = await TcpTransport().serve(
        "127.0.0.1", port, role="compute", handler=replica.handle, secret=secret
    )
    print(f"ready {server.port}", flush=True)
    while True:
        await asyncio.sleep(0.02)
        with contextlib.suppress(ConnectionClosed):  # the controller went away: keep serving
            await replica.advance(clock_upper())


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    asyncio.run(main(ap.parse_args().port))
