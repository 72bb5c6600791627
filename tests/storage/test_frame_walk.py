"""The header walk over stored bytes a read serves: the C walk (storage/_frame_walk.c) says what the Python
reference (partitionlet.frame_walk_py) says, on whole batches and on bytes damaged every way at random."""

from __future__ import annotations

import random

import pytest
from kafkacompat.storage.disk import partitionlet
from storage_testkit import batch

try:
    from kafkacompat.storage._frame_walk import frame_walk as c_walk
except ImportError:  # not built here: the Python walk is what runs
    c_walk = None

BATCHES = b"".join(batch(n, size=30 + n) for n in (1, 3, 1, 7, 2))


def renumbered(data: bytes, first: int) -> bytes:
    """Whole batches with base offsets following on from `first` (as the store writes them)."""
    out, pos, base = bytearray(data), 0, first
    while pos < len(out):
        out[pos:pos + 8] = base.to_bytes(8, "big")
        base += int.from_bytes(out[pos + 23:pos + 27], "big") + 1
        pos += 12 + int.from_bytes(out[pos + 8:pos + 12], "big")
    return bytes(out)


def test_whole_batches_walk_to_the_end() -> None:
    data = renumbered(BATCHES, 40)
    assert partitionlet.frame_walk_py(data, 0, -1) == (len(data), 54, -1)
    assert partitionlet.frame_walk_py(data, 0, 40) == (len(data), 54, -1)
    assert partitionlet.frame_walk_py(data, 0, 41) == (0, 41, 40)  # not the offset expected: a jump


@pytest.mark.skipif(c_walk is None, reason="the C walk was not built here")
def test_the_c_walk_says_what_the_python_walk_says() -> None:
    rng = random.Random(55)
    whole = renumbered(BATCHES, 1000)
    for _ in range(5000):
        data = bytearray(whole[: rng.randrange(len(whole) + 1)])
        for _ in range(rng.randrange(3)):
            if data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        expected = rng.choice([-1, 1000, 1001])
        assert c_walk(bytes(data), 0, expected) == partitionlet.frame_walk_py(bytes(data), 0, expected), data.hex()
