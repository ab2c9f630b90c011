"""Counter-based pseudo-random numbers: a value is a pure function of (seed, stream, index).

Load generators must produce the same data for an event whatever chunk it is generated in, so
they never keep a running random state: the ``k``-th random draw of event ``n`` is
``splitmix64(seed, stream k, n)``. Vectorised over numpy ``uint64`` arrays (arithmetic wraps).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

_GOLDEN: Final = np.uint64(0x9E3779B97F4A7C15)
_M1: Final = np.uint64(0xBF58476D1CE4E5B9)
_M2: Final = np.uint64(0x94D049BB133111EB)
_MASK: Final = (1 << 64) - 1


def _mix(z: U64) -> U64:
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def draws(seed: int, stream: int, index: npt.NDArray[np.integer]) -> U64:
    """64 random bits per element of ``index`` for draw ``stream`` under ``seed``."""
    key = _mix(
        np.array(
            [(seed * 0x2545F4914F6CDD1D + stream * 0x9E3779B97F4A7C15) & _MASK], dtype=np.uint64
        )
    )[0]
    with np.errstate(over="ignore"):
        z = index.astype(np.uint64) * _GOLDEN + key
        return _mix(z)


def uniform(seed: int, stream: int, index: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
    """Floats in ``[0, 1)``."""
    return (draws(seed, stream, index) >> np.uint64(11)).astype(np.float64) * (2.0**-53)


def below(seed: int, stream: int, index: npt.NDArray[np.integer], bound: int | I64) -> I64:
    """Integers in ``[0, bound)`` (``bound`` a scalar or an array, every bound ``>= 1``)."""
    u = uniform(seed, stream, index)
    return np.minimum((u * bound).astype(np.int64), np.asarray(bound, dtype=np.int64) - 1)
