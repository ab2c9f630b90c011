"""Transport messages: a msgpack document followed by its Arrow attachments, read in place."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spate.codec import decode, decode_message, encode, encode_message
from spate.errors import ProtocolError
from spate.ids import PeekId, SeededIdGen
from spate.protocol.compute import PeekResponse, PeekRows, Status

TABLE = pa.table(
    {"k": np.arange(1000, dtype=np.int64), "v": [f"x{i}" for i in range(1000)], "_diff": [1] * 1000}
)
MESSAGE = PeekResponse(PeekId.new(SeededIdGen(1)), PeekRows(TABLE))


def body() -> bytearray:
    return bytearray(b"".join(encode_message(MESSAGE)))


def test_attachments_are_read_in_place_and_aligned() -> None:
    data = body()
    decoded = decode_message(memoryview(data))
    assert decoded == MESSAGE
    rows = decoded.response.rows  # type: ignore[attr-defined]
    base = pa.py_buffer(data).address
    for column in rows.columns:
        for buf in column.chunk(0).buffers():
            if buf is not None and buf.size:
                assert base <= buf.address < base + len(data)  # no copy
                assert (buf.address - base) % 8 == 0
    # Messages without tables are plain msgpack: the two encodings agree.
    status = Status("ok")
    assert encode_message(status) == [encode(status)]
    assert decode_message(encode(status)) == status == decode(encode(status), Status)
    # The inline form is accepted too.
    assert decode_message(encode(MESSAGE)) == MESSAGE


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b + b"\x00", "1 unexpected bytes after the message"),
        (lambda b: b[:-1], "runs past the end"),
        (lambda b: b[: b.index(b"\xd6\x05") + 6], "runs past the end"),
        (lambda b: b"", "truncated document"),
    ],
)
def test_malformed_messages(mutate: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_message(mutate(bytes(body())))  # type: ignore[operator]


def test_bad_padding_and_plain_decoder_refuse_references() -> None:
    data = body()
    doc_end = data.index(b"\xd6\x05") + 6
    pad = -doc_end % 8
    if pad:
        data[doc_end] = 1
        with pytest.raises(ProtocolError, match="bad padding"):
            decode_message(bytes(data))
    with pytest.raises(ProtocolError, match="unknown msgpack ext type 5"):
        decode(bytes(body()[:doc_end]), PeekResponse)
