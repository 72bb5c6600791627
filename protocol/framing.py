"""Size-prefixed frames: a 4-byte big-endian length, then that many bytes."""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class FrameError(ValueError):
    """A frame that cannot be accepted; the connection must be closed."""


class FrameTooLargeError(FrameError):
    pass


def frame_size(prefix: bytes | bytearray, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> int:
    """Decode and check the 4-byte size prefix of the next frame."""
    (size,) = SIZE.unpack(prefix)
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds the limit of {max_bytes} bytes")
    return size


def frame(payload: bytes | bytearray) -> bytes:
    return SIZE.pack(len(payload)) + payload


class FrameDecoder:
    """Incremental splitter for a byte stream: feed bytes, take whole frames."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_bytes

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames = []
        pos = 0
        buf = self._buf
        while len(buf) - pos >= 4:
            size = frame_size(bytes(buf[pos : pos + 4]), self._max)
            if len(buf) - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        return len(self._buf)
