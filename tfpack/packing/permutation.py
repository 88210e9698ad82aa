"""Seeded pseudo-random permutations of ``[0, size)``, one index at a time.

`Permutations` holds one permutation per *stream* (e.g. one per example
length, one for the packs); ``perms(index, stream)`` maps each index to its
image without building any array of the domain's size, so a worker that only
sees a few examples can place them exactly where a worker seeing all of them
would. Construction: a 4-round Feistel network over the smallest even number
of bits that covers ``size``, keyed by ``(seed, stream, round)``, with cycle
walking back into ``[0, size)`` (Black and Rogaway, "Ciphers with Arbitrary
Finite Domains", CT-RSA 2002). The domain is at most 4x ``size``, so an index
walks fewer than 4 times on average.

Example:

>>> import numpy as np
>>> perms = Permutations(seed=0, sizes=np.array([10, 3]))
>>> image = perms(np.arange(10), np.zeros(10, np.int64))
>>> sorted(image.tolist()) == list(range(10))
True
>>> again = Permutations(seed=0, sizes=[10, 3])  # same seed, same permutations
>>> np.array_equal(again(np.arange(10), np.zeros(10, np.int64)), image)
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["Permutations"]

_ROUNDS = 4
_CHUNK = 1 << 16
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_M32 = np.uint32(0x9E3779B1)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a 64-bit bijective hash (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _round(right: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The Feistel round function: a keyed multiply-xorshift (high bits mixed down).

    In 32-bit arithmetic when every domain fits in 32 bits: numpy vectorizes
    32-bit multiplies, about 10x faster than 64-bit ones.
    """
    if right.dtype == np.uint32:
        x = (right ^ key) * _M32
        return x ^ (x >> np.uint32(16))
    x = (right ^ key) * _M1
    return x ^ (x >> np.uint64(32))


class Permutations:
    """One seeded permutation of ``[0, sizes[s])`` for each stream ``s``.

    Args:
        seed: non-negative integer; same seed, same permutations.
        sizes: int ``[streams]``, the domain size of each stream.

    Call with ``(index, stream)``, int arrays of one shape with
    ``0 <= index < sizes[stream]``; returns the int64 images.
    """

    def __init__(self, seed: int, sizes):
        self.sizes = np.asarray(sizes, dtype=np.int64)
        base = np.random.SeedSequence(int(seed)).generate_state(2, np.uint64)
        streams = np.arange(self.sizes.size, dtype=np.uint64)
        rounds = np.arange(_ROUNDS, dtype=np.uint64)
        self.keys = _mix(base[0] ^ _mix(base[1] + (streams[:, None] << np.uint64(8)) + rounds))
        # Half width: the smallest k with 4**k >= size (at least 1).
        bits = np.frexp(np.maximum(self.sizes - 1, 1).astype(np.float64))[1]
        half = np.maximum((bits + 1) // 2, 1)
        self.dtype = np.uint32 if self.sizes.max(initial=0) < 2**32 else np.uint64
        self.half = half.astype(self.dtype)
        self.keys = self.keys.astype(self.dtype)  # the low 32 bits in 32-bit mode

    def __getstate__(self):
        return {"sizes": self.sizes, "keys": self.keys, "half": self.half, "dtype": self.dtype}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _feistel(self, x: np.ndarray, stream: np.ndarray) -> np.ndarray:
        half = self.half[stream]
        one = self.dtype(1)
        mask = (one << half) - one
        left, right = x >> half, x & mask
        keys = self.keys[stream]
        for r in range(_ROUNDS):
            left, right = right, left ^ (_round(right, keys[:, r]) & mask)
        return (left << half) | right

    def __call__(self, index, stream) -> np.ndarray:
        index = np.asarray(index, dtype=np.int64).ravel()
        stream = np.broadcast_to(np.asarray(stream, dtype=np.int64), index.shape)
        out = np.empty(index.size, dtype=np.int64)
        # Chunks that stay in cache: the round function is a dozen passes.
        for start in range(0, index.size, _CHUNK):
            out[start:start + _CHUNK] = self._chunk(index[start:start + _CHUNK],
                                                    stream[start:start + _CHUNK])
        return out

    def _chunk(self, index: np.ndarray, stream: np.ndarray) -> np.ndarray:
        size = self.sizes[stream].astype(self.dtype)
        out = self._feistel(index.astype(self.dtype), stream)
        todo = np.flatnonzero(out >= size)
        while todo.size:
            out[todo] = self._feistel(out[todo], stream[todo])
            todo = todo[out[todo] >= size[todo]]
        return out.astype(np.int64)
