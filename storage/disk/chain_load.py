"""Opening a disk partition: its chain from the manifest, or rebuilt from the files, and its tail recovered.

What an open finds on disk and decides about it, apart from the partition
that then serves appends and reads (partition.py, whose docstring says what
the manifest, the checkpoint and the reservation guarantee). The chain
manifest is read; when it is missing, garbled, names an unknown volume or is
older than the files, the chain is rebuilt from the partitionlet files (see
chain.py). The active partitionlet's tail is validated from the checkpoint
(and its last TAIL_CHECK_BYTES on every open); damaged batches become
quarantined holes, and offsets the manifest, the files or the reservation
vouch for are never handed out again. Every finding is reported through the
store (one line each). The result is a LoadedChain the partition takes over.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Protocol

from ..errors import StorageError, StorageUnavailableError
from . import layout
from .chain import LogFile, find_log_files, read_manifest, stale_reason
from .files import move_to_trash, new_file
from .handles import FileHandles
from .partitionlet import Partitionlet, Recovered
from .recovery import covered
from .volumes import Volume

log = logging.getLogger(__name__)

TAIL_CHECK_BYTES = 4 << 20  # of the active partitionlet, checked on every open


class LoadingStore(Protocol):
    """What loading a partition needs of its store (declared here: the store imports the partitions)."""

    volumes: list[Volume]
    repair: bool  # False for an offline check: nothing is written, cut or removed
    clean: bool  # the last stop was clean
    handles: FileHandles

    def volume(self, volume_id: str) -> Volume: ...

    def volume_ids(self) -> list[str]: ...

    def report(self, path: str, problem: str, action: str, *, error: bool = False) -> None: ...


@dataclasses.dataclass
class LoadedChain:
    """A partition's state as found on open (the partition's fields of the same names)."""

    chain: list[Partitionlet] = dataclasses.field(default_factory=list)
    bases: list[int] = dataclasses.field(default_factory=list)
    log_start: int = 0
    hw: int = 0
    reserved: int = 0  # every offset handed out is below it (durable in the manifest)
    epochs: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    tail_epochs: list[tuple[int | None, int]] = dataclasses.field(default_factory=list)  # found in the active tail
    checkpoint: int = 0  # size of the active partitionlet the manifest vouches for
    home: Volume | None = None
    manifest_stale: bool = False
    # offsets were quarantined that the files no longer show (the log lost bytes): only the manifest can
    # remember them, so it must be written before the partition serves (a kill -9 first would forget them)
    must_save: bool = False

    def active(self) -> Partitionlet | None:
        if self.chain and not self.chain[-1].sealed:
            return self.chain[-1]
        return None


class ChainLoader:
    def __init__(self, store: LoadingStore, name: str, topic_id: str, manifest_path: str,
                 dir_on: Callable[[str], str], handles: FileHandles | None = None) -> None:
        self._store = store
        self._handles = store.handles if handles is None else handles  # a thread's own, when opened off the loop
        self.name = name  # "<stream>:<topic>/<index>", for logs
        self._topic_id = topic_id
        self._manifest_path = manifest_path
        self.dir_on = dir_on  # the partition's directory on a volume
        self.state = LoadedChain()

    def load(self) -> LoadedChain:
        """The chain as the manifest (or, failing it, the files) says, its active tail checked."""
        self._load()
        return self.state

    def _load(self) -> None:
        manifest, problem = read_manifest(self._manifest_path)
        if problem is not None and manifest is None and problem.startswith("cannot be read"):
            # Unreadable (an I/O error), not garbled: refuse rather than guess the offsets from what is left.
            raise StorageUnavailableError(f"its chain manifest {self._manifest_path} {problem}")
        if manifest is not None and manifest["topic_id"] != self._topic_id:
            log.warning("%s: data of an older topic of the same name found; discarding it", self.name)
            for volume in self._store.volumes if self._store.repair else ():
                move_to_trash(self.dir_on(volume.path), layout.trash_dir(volume.path))
            return
        files = find_log_files([(v, self.dir_on(v.path)) for v in self._store.volumes])
        if manifest is not None:
            self.state.home = self._load_home(manifest.get("home"))
            problem = stale_reason(manifest, files, set(self._store.volume_ids()))
        if problem is None and manifest is None:
            if not any(f.size for f in files.values()):
                return  # a partition that never held data
            problem = "is missing"
        if problem is not None:
            self._rebuild(manifest, files, problem)
            return
        self.state.log_start = manifest["log_start"]
        self.state.hw = manifest["next"]
        self.state.reserved = _reservation(manifest)
        self.state.epochs = list(manifest["epochs"])
        for rec in manifest["partitionlets"]:
            volume = self._store.volume(rec["volume"])
            p = Partitionlet(
                self.dir_on(volume.path), volume, rec["base"], self._handles, sealed=rec["sealed"],
                next_offset=rec["next"], size=rec["size"], max_ts=rec["max_ts"],
                max_ts_offset=rec["max_ts_offset"], created_ms=rec["created_ms"],
                generation=rec.get("generation", 0), clean_to=rec.get("clean_to"),
                cleaned_ms=rec.get("cleaned_ms", 0), tombstones=rec.get("tombstones", 0),
            )
            for hole in rec.get("holes", ()):
                p.add_hole(*hole)
            if p.sealed and not os.path.exists(p.log_path):
                p.missing = True
                self._store.report(p.log_path, "is missing", f"quarantine offsets {p.base}..{p.next_offset - 1}",
                                   error=True)
            self.state.chain.append(p)
        self.state.bases = [p.base for p in self.state.chain]
        if self._store.repair:
            self._remove_orphans(files)
        active = self.state.active()
        if active is not None:
            self.state.checkpoint = active.size
            self._recover(active)
        self.state.reserved = max(self.state.reserved, self.state.hw)

    def _load_home(self, volume_id: object) -> Volume | None:
        if volume_id is None:
            return None
        try:
            return self._store.volume(str(volume_id))
        except StorageError:
            self._store.report(self._manifest_path, f"names home volume {volume_id!r}, which is not configured",
                               "keep new partitionlets wherever there is most room")
            self.state.manifest_stale = True
            return None

    def _rebuild(self, manifest: dict | None, files: dict[int, LogFile], problem: str) -> None:
        """Rebuild the chain from the partitionlet files (the manifest is missing, garbled or stale)."""
        last = max(files, default=-1)
        bases = sorted(b for b, f in files.items() if f.size > 0 or b == last)
        log_start = manifest["log_start"] if manifest is not None else (bases[0] if bases else 0)
        known_next = manifest["next"] if manifest is not None else 0
        epochs: list[tuple[int, int]] = list(manifest["epochs"]) if manifest is not None else []
        for i, base in enumerate(bases):
            found = files[base]
            limit = bases[i + 1] if i + 1 < len(bases) else None
            if limit is not None:
                # A sealed partitionlet ends where the next begins; its CRCs are checked by the
                # background pass (and by reads before it gets there), not here in the loop.
                p = Partitionlet(self.dir_on(found.volume.path), found.volume, base, self._handles,
                                 sealed=True, next_offset=limit, size=found.size, max_ts=-1, max_ts_offset=base,
                                 created_ms=found.mtime_ms)
                p.learn_max_timestamp()
                found_epochs = [(p.first_epoch(), base)]
            else:
                p = Partitionlet(self.dir_on(found.volume.path), found.volume, base, self._handles,
                                 sealed=False, next_offset=base, size=0, max_ts=-1, max_ts_offset=base,
                                 created_ms=found.mtime_ms)
                result = p.recover(0, base, truncate=self._store.repair, known_next=known_next)
                if result.cut is not None and manifest is not None:
                    known_next = self._loss_floor(known_next, _reservation(manifest))
                self._report_damage(p, result, vouched=known_next)
                found_epochs = result.epochs
            for epoch, start in found_epochs:
                if epoch is not None and (not epochs or epochs[-1][0] < epoch):
                    epochs.append((epoch, start))
            self.state.chain.append(p)
        self.state.bases = [p.base for p in self.state.chain]
        self.state.epochs = epochs
        self.state.log_start = max(log_start, self.state.chain[0].base if self.state.chain else log_start)
        self.state.hw = self.state.chain[-1].next_offset if self.state.chain else known_next
        active = self.state.active()
        if active is not None and known_next > active.next_offset:
            active.add_hole(active.next_offset, known_next, active.size, active.size)
            active.next_offset = known_next
            self.state.must_save = True
        self.state.hw = max(self.state.hw, known_next)
        self.state.reserved = max(self.state.hw, _reservation(manifest) if manifest is not None else 0)
        self.state.manifest_stale = True
        self._store.report(self._manifest_path, problem, f"rebuild it from {len(self.state.chain)} partitionlet "
                           f"file(s), offsets {self.state.log_start}..{self.state.hw - 1}")

    def _report_damage(self, p: Partitionlet, result: Recovered, vouched: int | None) -> None:
        """One line per damaged stretch found while validating a partitionlet."""
        for hole in result.holes:
            self._store.report(p.log_path, hole.reason, f"quarantine offsets {hole.first}..{hole.resume - 1}",
                               error=True)
        cut = result.cut
        if cut is None:
            return
        lost = f" and quarantine offsets {cut.first}..{vouched - 1}" if vouched and vouched > cut.first else ""
        action = (f"cut the {result.cut_bytes} bytes after the last valid batch{lost}" if not p.sealed
                  else f"quarantine offsets {cut.first}..{p.next_offset - 1}")
        self._store.report(p.log_path, cut.reason, action, error=bool(lost) or p.sealed)

    def _remove_stale_generations(self) -> None:
        """Delete files of a listed partitionlet's other generations (the cleaner's, before or after a swap)."""
        listed_paths = {path for p in self.state.chain for path in p.paths()}
        listed_bases = {p.base for p in self.state.chain}
        for volume in self._store.volumes:
            directory = self.dir_on(volume.path)
            try:
                names = os.listdir(directory)
            except FileNotFoundError:
                continue
            for name in names:
                if not layout.is_partitionlet_file(name):
                    continue
                path = os.path.join(directory, name)
                if int(name.partition(".")[0].partition("-g")[0]) in listed_bases and path not in listed_paths:
                    if name.endswith(layout.LOG_SUFFIX):
                        volume.release(os.path.getsize(path))
                    log.warning("%s: removing %s, which its manifest does not list", self.name, path)
                    os.unlink(path)

    def _remove_orphans(self, files: dict[int, LogFile]) -> None:
        """Delete partitionlet files the manifest does not list and no longer needs.

        A crash between writing the manifest and unlinking what it dropped
        (retention, DeleteRecords) or while rolling leaves such files: below
        the first listed partitionlet, or empty. (Unlisted files holding data
        above it make the manifest stale; it is rebuilt instead.) A log cleaner
        killed mid-way leaves another generation of a listed partitionlet.
        """
        self._remove_stale_generations()
        listed = {(p.volume.id, p.base) for p in self.state.chain}
        for base, found in files.items():
            if (found.volume.id, base) in listed:
                continue
            directory = self.dir_on(found.volume.path)
            for name in os.listdir(directory):
                stem, dot, suffix = name.partition(".")
                if dot and stem.isdigit() and int(stem) == base and "." + suffix in layout.PARTITIONLET_SUFFIXES:
                    path = os.path.join(directory, name)
                    if suffix == layout.LOG_SUFFIX[1:]:
                        found.volume.release(found.size)
                    log.warning("%s: removing %s, which its manifest does not list", self.name, path)
                    os.unlink(path)

    def _recover(self, active: Partitionlet) -> None:
        """Check the active partitionlet's tail: what was written after the checkpoint, and the last bytes.

        After an unclean stop the log may run past the checkpoint (validated
        and kept) or be torn (cut after the last valid batch). After a clean
        one, bytes may still have been damaged on disk: the last
        TAIL_CHECK_BYTES are checked on every open; the rest is verified in
        the background. Offsets the manifest vouched for but the file no
        longer holds become a hole: they are never handed out again.
        """
        vouched = active.next_offset
        known = [(h[0], h[1]) for h in active.holes]  # quarantined before: not news when found again
        try:
            file_size = os.stat(active.log_path).st_size
        except FileNotFoundError:
            vouched = self._loss_floor(vouched, self.state.reserved)
            if self._store.repair:
                new_file(active.log_path)
            active.start_empty()
            active.size, active.max_ts = 0, -1
            active.add_hole(active.base, vouched, 0, 0)
            active.next_offset = self.state.hw = vouched
            self.state.manifest_stale = True
            lost = vouched > active.base
            self.state.must_save = lost
            self._store.report(active.log_path, "is missing", "start it empty" + (
                f" and quarantine offsets {active.base}..{vouched - 1}" if lost else ""), error=lost)
            return
        start, expected = 0, active.base
        if file_size >= self.state.checkpoint:
            active.ensure_index()
            start, expected = active.position_before(max(min(self.state.checkpoint, file_size - TAIL_CHECK_BYTES), 0))
        if start == 0:
            active.size, active.max_ts = 0, -1
        result = active.recover(start, expected, truncate=self._store.repair, known_next=vouched)
        self.state.tail_epochs = list(result.epochs)  # noted by the partition (PartitionBase._note_epoch)
        if result.cut is not None or file_size < self.state.checkpoint:  # bytes were lost
            vouched = self._loss_floor(vouched, self.state.reserved)
        if active.next_offset < vouched:
            if result.cut is None and not covered(known, active.next_offset, vouched):
                self._store.report(active.log_path, f"ends at offset {active.next_offset} (byte {active.size})",
                                   f"quarantine offsets {active.next_offset}..{vouched - 1}", error=True)
            active.add_hole(active.next_offset, vouched, active.size, active.size)
            active.next_offset = vouched
            self.state.must_save = True
        self._report_damage(active, result, vouched)
        if active.size != self.state.checkpoint or result.holes or result.cut is not None:
            self.state.manifest_stale = True
        self.state.hw = active.next_offset
        if active.size != self.state.checkpoint and result.cut is None:
            log.info("%s: recovered to offset %d (%d bytes)", self.name, active.next_offset, active.size)

    def _loss_floor(self, vouched: int, reserved: int) -> int:
        """Where offsets go on when the active log lost bytes: after an unclean stop, offsets up to
        the reservation may have been handed out (acknowledged or read) since the manifest was written."""
        return vouched if self._store.clean else max(vouched, reserved)


def _reservation(manifest: dict) -> int:
    """The manifest's reservation (a manifest written before reservations: its high watermark)."""
    reserved = manifest.get("reserved")
    return reserved if isinstance(reserved, int) and reserved >= manifest["next"] else manifest["next"]
