"""The disk engine's nemesis marks the one partitionlet damage docs/operations.md says a start cannot see (an active
log cut exactly at a batch boundary past its manifest's checkpoint), and nothing else, so the checker's
allowance for it stays that narrow."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from kafkacompat.chaos.disk import batch_starts, cut_at_boundary


def log_of_three_batches(tmp_path: Path, checkpoint: int | None) -> Path:
    """Three 100-byte batches holding offsets 10-11, 12-14 and 15 (only the header fields the walk reads)."""
    path = tmp_path / "00000000000000000010.log"
    data = bytearray()
    for base, count in ((10, 2), (12, 3), (15, 1)):
        batch = bytearray(100)
        struct.pack_into(">qi", batch, 0, base, 100 - 12)
        struct.pack_into(">i", batch, 23, count - 1)
        data += batch
    path.write_bytes(bytes(data))
    if checkpoint is not None:
        (tmp_path / "chain.json").write_text(json.dumps({"partitionlets": [{"base": 10, "size": checkpoint}]}))
    return path


def test_only_a_cut_at_a_batch_boundary_past_the_checkpoint_is_unseen(tmp_path: Path) -> None:
    path = log_of_three_batches(tmp_path, checkpoint=100)
    before = batch_starts(path)
    assert before == {0: 10, 100: 12, 200: 15, 300: 16}
    assert cut_at_boundary(path, before) is None  # not cut (a flipped bit keeps the size)
    os.truncate(path, 250)
    assert cut_at_boundary(path, before) is None  # inside a batch: a torn tail, which a start sees
    os.truncate(path, 200)
    assert cut_at_boundary(path, before) == 15  # offsets 15 on are gone, and nothing says so
    os.truncate(path, 100)
    assert cut_at_boundary(path, before) == 12  # at the checkpoint: still looks like a log that ended there
    os.truncate(path, 0)
    assert cut_at_boundary(path, before) is None  # shorter than the checkpoint: a start sees the loss
    path.unlink()
    assert cut_at_boundary(path, before) is None  # a missing log: a start sees it


def test_without_a_manifest_any_cut_at_a_boundary_is_unseen(tmp_path: Path) -> None:
    path = log_of_three_batches(tmp_path, checkpoint=None)
    before = batch_starts(path)
    os.truncate(path, 0)
    assert cut_at_boundary(path, before) == 10
