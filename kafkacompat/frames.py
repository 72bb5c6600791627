"""Kafka's size-prefixed frames read from a blocking socket.

The admin CLI, its SASL login and the startup bench all talk to a broker
over a plain blocking socket and need the same loop: a 4-byte big-endian
size, then exactly that many bytes, however the kernel splits them. Each
caller turns the two failures below into its own user-facing error.
"""

from __future__ import annotations

import socket
import struct

_SIZE = struct.Struct(">i")


class FrameError(ConnectionError):
    """A frame could not be read."""


class PeerClosed(FrameError):
    """The peer closed the connection before the frame was whole."""


class ImpossibleSize(FrameError):
    """The size prefix is negative or beyond what the caller accepts."""


def read_exactly(sock: socket.socket, count: int) -> bytes:
    """Exactly `count` bytes; PeerClosed if the peer closes first."""
    chunks = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            raise PeerClosed("the peer closed the connection")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket, max_size: int = 1 << 30) -> bytes:
    """One frame's body without its size prefix; PeerClosed, or ImpossibleSize outside 0..max_size."""
    (size,) = _SIZE.unpack(read_exactly(sock, 4))
    if not 0 <= size <= max_size:
        raise ImpossibleSize(f"a frame of impossible size {size}")
    return read_exactly(sock, size)
