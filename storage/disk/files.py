"""Small file primitives with the crash-safety each caller relies on."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Callable

from ..errors import StorageFullError

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: str) -> None:
    """fsync a file by name; a file deleted meanwhile needs no fsync."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_if_there(path: str) -> tuple[bytes | None, str | None]:
    """(content, None), (None, None) when there is no such file, or (None, why it cannot be read): a
    record a start reads, where a missing one is normal and an unreadable one is named in a log line."""
    try:
        with open(path, "rb") as f:
            return f.read(), None
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"


def make_dirs(path: str) -> None:
    """mkdir -p, fsyncing each parent so the new directories survive a crash."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            continue
        fsync_dir(os.path.dirname(directory))


def new_file(path: str) -> None:
    """Create an empty file (and its directories) durably."""
    make_dirs(os.path.dirname(path))
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    except OSError as exc:
        if exc.errno in FULL_ERRNOS:
            raise StorageFullError(f"no room to create {path}: {exc.strerror}") from exc
        raise
    fsync_dir(os.path.dirname(path))


def write_atomic(
    path: str, data: bytes, *, durable: bool = True, on_full: Callable[[], bool] | None = None
) -> None:
    """Replace `path` so readers see the old or the new content, never a mix.

    Write a temporary file, fsync it, rename it over the target, fsync the
    directory (the rename is durable only then). On a full disk, `on_full`
    may free some room (returning True) and the write is tried once more.
    """
    try:
        _write_atomic(path, data, durable)
    except StorageFullError:
        if on_full is None or not on_full():
            raise
        _write_atomic(path, data, durable)


def _write_atomic(path: str, data: bytes, durable: bool) -> None:
    directory = os.path.dirname(path)
    tmp = f"{path}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if durable:
            fsync_dir(directory)
    except OSError as exc:
        if exc.errno in FULL_ERRNOS:
            _remove_quietly(tmp)
            raise StorageFullError(f"no room to write {path}: {exc.strerror}") from exc
        raise


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def move_to_trash(path: str, trash: str) -> str | None:
    """Atomically take a tree out of the namespace; returns where it went."""
    if not os.path.exists(path):
        return None
    target = os.path.join(trash, uuid.uuid4().hex)
    os.rename(path, target)
    fsync_dir(os.path.dirname(path))
    return target


def empty_trash(trash: str) -> None:
    if os.path.isdir(trash):
        for name in os.listdir(trash):
            shutil.rmtree(os.path.join(trash, name), ignore_errors=True)


def unlink_files(paths: list[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
