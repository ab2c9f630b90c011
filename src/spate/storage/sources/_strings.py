"""Vectorised, deterministic strings for the load generators.

Random text is cut from one fixed pseudo-random buffer (``TEXT``) at hashed offsets, so making a
string costs one draw, not one per character. Every function is a pure function of
``(seed, stream, index)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spate.storage.sources._hash import below, draws

_TEXT_LEN: Final = 1 << 20
_MAX_LEN: Final = 1 << 16
TEXT: Final[npt.NDArray[np.uint8]] = (
    (draws(0x5EED, 0, np.arange(_TEXT_LEN, dtype=np.int64)) % np.uint64(26)) + np.uint64(97)
).astype(np.uint8)
"""A fixed MiB of lower-case letters: the quarry of every random string."""


def random_strings(
    seed: int, stream: int, index: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> pa.Array:
    """For each ``index[i]`` a string of ``lengths[i]`` letters (``0 <= lengths <= 2**16``)."""
    n = len(index)
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(lengths) and int(lengths.max()) > _MAX_LEN:
        raise ValueError(f"random strings are at most {_MAX_LEN} characters")
    # The bound must not depend on the chunk: a string is a function of its index only.
    starts = below(seed, stream, index, _TEXT_LEN - _MAX_LEN)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    positions = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    data = TEXT[positions]
    return pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())]
    ).cast(pa.string())


def fixed_strings(seed: int, stream: int, index: npt.NDArray[np.int64], length: int) -> pa.Array:
    return random_strings(seed, stream, index, np.full(len(index), length, dtype=np.int64))


def varying_strings(seed: int, stream: int, index: npt.NDArray[np.int64], average: int) -> pa.Array:
    """Lengths uniform in ``[0.8 * average, 1.2 * average]``."""
    lo = max(0, average - average // 5)
    span = 2 * (average // 5) + 1
    lengths = lo + below(seed, stream + 1000, index, span)
    return random_strings(seed, stream, index, lengths)


def choose(
    seed: int, stream: int, index: npt.NDArray[np.int64], options: Sequence[str]
) -> pa.Array:
    return pc.take(
        pa.array(list(options), pa.string()), pa.array(below(seed, stream, index, len(options)))
    )


def digits(values: npt.NDArray[np.int64], width: int) -> pa.Array:
    """Non-negative integers as zero-padded decimal text."""
    return pc.utf8_lpad(pc.cast(pa.array(values, pa.int64()), pa.string()), width, "0")


def join(*parts: pa.Array | str) -> pa.Array:
    """Element-wise concatenation of string arrays and literal strings."""
    if all(isinstance(p, str) for p in parts):
        raise ValueError("join needs at least one array")
    cols = [pa.scalar(p, pa.string()) if isinstance(p, str) else p for p in parts]
    return pc.binary_join_element_wise(*cols, "")
