"""Benchmark: a 200k-row peek response end to end over loopback, against raw socket throughput.

A replica process (the child) serves the real transport (HMAC handshake, framing, codec). The
controller (this process) sends a ``Peek``; the replica encodes a ``PeekResponse`` whose rows
travel as an Arrow IPC stream attached after the msgpack document (sent from the table's own
buffers); the controller receives it into one buffer and decodes it in place, with full Arrow
validation. The baseline, in the same run over the same kind of socket between the
same two processes: the same number of bytes sent raw with one write and received straight
into a preallocated buffer (an ``asyncio.BufferedProtocol``, the fastest asyncio read path). The
alternative wire form — the same rows as msgpack arrays, decoded and checked field by field by
the strict codec — is measured too, to justify the choice. Target: ratio (peek MB/s ÷ raw MB/s)
>= 0.5.

    python -m bench.protocol [--rows N] [--repeat K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bench._results import write_result
from spate.codec import decode, encode, encode_message
from spate.frontier import Antichain
from spate.ids import GlobalId, PeekId, SeededIdGen
from spate.plan.finishing import RowSetFinishing
from spate.protocol.compute import IndexTarget, Peek, PeekResponse, PeekRows
from spate.protocol.connection import Connection
from spate.protocol.frame import HEADER_SIZE
from spate.protocol.transport import connect, serve
from spate.repr import FLOAT64, INT64, TEXT, RelationDesc
from spate.repr.types import Row
from spate.wire import wire

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT, False), ("price", FLOAT64, False))
_ = Antichain  # frontiers are not part of this benchmark


@wire("bench.msgpack_rows")
@dataclass(frozen=True, slots=True)
class MsgpackRows:
    """The alternative wire form: rows as msgpack arrays plus their multiplicities."""

    rows: tuple[Row, ...]
    diffs: tuple[int, ...]


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table(
        {
            "k": np.arange(rows, dtype=np.int64),
            "v": pa.array([f"value-{i % 9973}" for i in range(rows)], pa.string()),
            "price": rng.random(rows),
            "_diff": np.ones(rows, dtype=np.int64),
        }
    )


# --- the replica (child process) -------------------------------------------------------------


async def replica(rows: int, secret: str) -> None:
    table = make_table(rows)
    as_rows = tuple(zip(*(table.column(c).to_pylist() for c in ("k", "v", "price")), strict=True))
    diffs = tuple(table.column("_diff").to_pylist())
    message = PeekResponse(PeekId.new(SeededIdGen(0)), PeekRows(table))
    body = b"".join(encode_message(message))
    raw_size = HEADER_SIZE + len(body)
    raw_payload = os.urandom(raw_size)

    async def handle(conn: Connection) -> None:
        while True:
            peek = await conn.recv()
            assert isinstance(peek, Peek)
            await conn.send(PeekResponse(peek.uuid, PeekRows(table)))

    async def handle_raw(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while request := await reader.read(1):
            if request == b"R":
                writer.write(raw_payload)
            else:
                body = encode(MsgpackRows(as_rows, diffs))
                writer.write(len(body).to_bytes(4, "big") + body)
            await writer.drain()

    server = await serve("127.0.0.1", 0, role="compute", secret=secret, handler=handle)
    raw = await asyncio.start_server(handle_raw, "127.0.0.1", 0, limit=1 << 20)
    raw_port = raw.sockets[0].getsockname()[1]
    print(json.dumps({"port": server.port, "raw_port": raw_port, "raw_size": raw_size}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until parent exits


# --- the controller (this process) -----------------------------------------------------------


class RawSink(asyncio.BufferedProtocol):
    """Receives ``n`` raw bytes straight into a preallocated buffer (or, with ``n=None``, one
    4-byte length-prefixed body)."""

    def __init__(self) -> None:
        self._buf = bytearray(4)
        self._got = 0
        self._sized = True
        self._done: asyncio.Future[bytearray] | None = None

    def expect(self, n: int | None) -> asyncio.Future[bytearray]:
        self._sized = n is not None
        self._buf = bytearray(4 if n is None else n)
        self._got = 0
        self._done = asyncio.get_running_loop().create_future()
        return self._done

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self._buf)[self._got :]

    def buffer_updated(self, nbytes: int) -> None:
        self._got += nbytes
        if self._got < len(self._buf):
            return
        if not self._sized:  # the length prefix arrived: now the body
            self._buf = bytearray(int.from_bytes(self._buf, "big"))
            self._got, self._sized = 0, True
            return
        assert self._done is not None
        self._done.set_result(self._buf)


async def measure(rows: int, repeat: int, rows_repeat: int) -> dict[str, float]:
    secret = secrets.token_hex(32)
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.protocol", "--serve", "--rows", str(rows)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "SPATE_BENCH_SECRET": secret},
        text=True,
    )
    try:
        assert child.stdout is not None
        info = json.loads(child.stdout.readline())
        conn = await connect("127.0.0.1", info["port"], role="compute", epoch=1, secret=secret)
        size = info["raw_size"]
        loop = asyncio.get_running_loop()
        sink = RawSink()
        transport, _ = await loop.create_connection(lambda: sink, "127.0.0.1", info["raw_port"])
        ids = SeededIdGen(1)

        async def peek() -> float:
            start = time.perf_counter()
            await conn.send(
                Peek(IndexTarget(GlobalId.user(1)), PeekId.new(ids), 0, RowSetFinishing(), DESC)
            )
            response = await conn.recv()
            elapsed = time.perf_counter() - start
            assert isinstance(response, PeekResponse) and isinstance(response.response, PeekRows)
            assert response.response.rows.num_rows == rows
            return elapsed

        async def raw() -> float:
            start = time.perf_counter()
            done = sink.expect(size)
            transport.write(b"R")
            data = await done
            elapsed = time.perf_counter() - start
            assert len(data) == size
            return elapsed

        async def msgpack_rows() -> float:
            start = time.perf_counter()
            done = sink.expect(None)
            transport.write(b"M")
            decoded = decode(await done, MsgpackRows)
            elapsed = time.perf_counter() - start
            assert len(decoded.rows) == rows
            return elapsed

        await peek()  # warm up both paths
        await raw()
        peeks, raws = [], []
        for _ in range(repeat):  # interleaved so that machine noise hits both alike
            raws.append(await raw())
            peeks.append(await peek())
        alternative = [await msgpack_rows() for _ in range(rows_repeat)]
        await conn.close()
        transport.close()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=10)
    t_raw, t_peek, t_rows = (statistics.median(x) for x in (raws, peeks, alternative))
    return {"bytes": size, "raw_s": t_raw, "peek_s": t_peek, "msgpack_rows_s": t_rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--rows-repeat", type=int, default=3)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(replica(args.rows, os.environ["SPATE_BENCH_SECRET"]))
        return
    r = asyncio.run(measure(args.rows, args.repeat, args.rows_repeat))
    mb = r["bytes"] / 1e6
    raw_mbs, peek_mbs = mb / r["raw_s"], mb / r["peek_s"]
    rows_mbs = mb / r["msgpack_rows_s"]
    ratio = peek_mbs / raw_mbs
    print(f"rows={args.rows:,} frame={mb:.1f} MB (Arrow IPC attached after the msgpack document)")
    print(f"raw socket, same bytes:     {raw_mbs:8.0f} MB/s ({r['raw_s'] * 1000:.1f} ms)")
    print(f"peek response, Arrow IPC:   {peek_mbs:8.0f} MB/s ({r['peek_s'] * 1000:.1f} ms)")
    print(
        f"alternative, msgpack rows:  {args.rows / r['msgpack_rows_s'] / 1e6:8.2f} M rows/s "
        f"({r['msgpack_rows_s'] * 1000:.0f} ms; {rows_mbs:.0f} MB/s-equivalent)"
    )
    print(f"ratio: {ratio:.2f}  (target >= 0.5)")
    write_result(
        "protocol",
        {
            "rows": args.rows,
            "frame_bytes": r["bytes"],
            "raw_mb_per_s": round(raw_mbs),
            "peek_mb_per_s": round(peek_mbs),
            "peek_ms": round(r["peek_s"] * 1000, 1),
            "raw_ms": round(r["raw_s"] * 1000, 1),
            "msgpack_rows_ms": round(r["msgpack_rows_s"] * 1000),
            "ratio": round(ratio, 2),
            "target": 0.5,
            "load_average_1m": round(os.getloadavg()[0], 2),
        },
    )


if __name__ == "__main__":
    main()
