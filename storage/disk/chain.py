"""Reading a partition's chain manifest defensively, and finding its partitionlet files.

The manifest (`chain.json`) is a convenience, not the only record: every
partitionlet file is named after its base offset and every batch in it
carries its own offsets and leader epoch. So a manifest that is missing,
unreadable, names a volume that is not configured, or lists fewer
partitionlets than the volumes hold, is rebuilt from the files instead of
letting the partition come back empty (and hand its offsets out again).
"""

from __future__ import annotations

import dataclasses
import json
import os

from . import layout
from .files import read_if_there
from .volumes import Volume

_PARTITIONLET_KEYS = ("base", "volume", "sealed", "next", "size", "max_ts", "max_ts_offset", "created_ms")


@dataclasses.dataclass(frozen=True, slots=True)
class LogFile:
    """A partitionlet log found on a volume."""

    volume: Volume
    path: str
    base: int
    size: int
    mtime_ms: int


def read_manifest(path: str) -> tuple[dict | None, str | None]:
    """(manifest, None), (None, None) when there is none, or (None, what is wrong with it)."""
    data, problem = read_if_there(path)
    if data is None:
        return None, problem
    try:
        manifest = json.loads(data)
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
        for key, kind in (("topic_id", str), ("log_start", int), ("next", int), ("epochs", list),
                          ("partitionlets", list)):
            if not isinstance(manifest.get(key), kind):
                raise ValueError(f"field {key!r} is missing or not a {kind.__name__}")
        for rec in manifest["partitionlets"]:
            if not isinstance(rec, dict) or any(k not in rec for k in _PARTITIONLET_KEYS):
                raise ValueError("a partitionlet record is incomplete")
        manifest["epochs"] = [(int(e), int(o)) for e, o in manifest["epochs"]]
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        return None, f"is garbled ({exc})"
    return manifest, None


def highest_recorded_epoch(root: str) -> int:
    """The largest leader epoch any partition's manifest in the store at `root` records (0 if none): the
    floor for the next epoch when the records of the epochs handed out (store.json, workers.json) are lost."""
    best = 0
    for directory, _dirs, files in os.walk(layout.streams_root(root)):
        if layout.MANIFEST_FILE in files:
            manifest, _ = read_manifest(os.path.join(directory, layout.MANIFEST_FILE))
            if manifest is not None and manifest["epochs"]:
                best = max(best, max(e for e, _ in manifest["epochs"]))
    return best


def find_log_files(dirs: list[tuple[Volume, str]]) -> dict[int, LogFile]:
    """Partitionlet logs by base offset, across the partition's directory on each volume.

    Two volumes holding a log of the same base (a copy left by a crash
    mid-move) resolve to the larger one.
    """
    found: dict[int, LogFile] = {}
    for volume, directory in dirs:
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            continue  # no data on this volume (any other error: the partition cannot be served)
        for entry in entries:
            if not (layout.is_partitionlet_file(entry.name) and entry.name.endswith(layout.LOG_SUFFIX)):
                continue  # (a log the cleaner rewrote is <base>-g<n>.log: the same partitionlet)
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            base = int(entry.name.partition(".")[0].partition("-g")[0])
            other = found.get(base)
            if other is None or st.st_size > other.size:
                found[base] = LogFile(volume, entry.path, base, st.st_size, st.st_mtime_ns // 1_000_000)
    return found


def stale_reason(manifest: dict, files: dict[int, LogFile], known_volumes: set[str]) -> str | None:
    """Why a readable manifest cannot be trusted as the chain, or None when it can."""
    listed = manifest["partitionlets"]
    for rec in listed:
        if rec["volume"] not in known_volumes:
            return f"names volume {rec['volume']!r}, which is not configured (a volume id changed?)"
    bases = {rec["base"] for rec in listed}
    floor = listed[0]["base"] if listed else manifest["log_start"]
    # Only retention (below the first listed) or a roll cut short (an empty file) leave unlisted files;
    # one holding bytes above the first listed means the manifest is older than the files.
    extra = sorted(b for b, f in files.items() if b not in bases and b >= floor and f.size > 0)
    if extra:
        return f"lists {len(listed)} partitionlet(s) but {len(extra)} more hold data (a stale copy?)"
    return None
