"""Handing a response's buffers to a plain TCP socket without joining them.

A Fetch answer arrives as a list of buffers: small envelope pieces and the
stored records, up to a megabyte each, as read from the partitionlet.
Python 3.11's `StreamWriter.writelines` joins that list into one new bytes
object before writing (a copy of every record byte, a fifth of a consumer's
broker time); 3.12's plain-socket transport sends the list with sendmsg
instead. So on 3.11 a plain TCP connection whose transport holds nothing
unsent gets the buffers with one gathering `os.writev`, and only what the
socket did not take is queued with the transport, which sends it when the
socket drains. TLS connections, and anything not a plain socket, keep
`writelines`: their bytes must go through the TLS layer, never around it.

An answer of more buffers than one writev takes (IOV_MAX: a Metadata for
every one of a million topics is 15,000 of them, about 100 MB) is written
a writev's worth at a time, waiting for the socket to drain between them
(`send_in_pieces`). Handed over whole, 3.11 joined it into one bytes
object and the transport copied what the socket did not take into its
buffer: two copies of the whole answer in one turn of the event loop,
which every other connection waited for (issue 32).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Sequence

from kafkacompat.protocol.fetch_response import Buffer

# 3.12+ transports gather with sendmsg themselves
NATIVE_GATHER = sys.version_info >= (3, 12)
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") and "SC_IOV_MAX" in os.sysconf_names else 16


def plain_socket_fd(writer: asyncio.StreamWriter) -> int | None:
    """The descriptor to gather-write to, or None when bytes must go through the transport (TLS)."""
    if NATIVE_GATHER or not hasattr(os, "writev"):
        return None
    transport = writer.transport
    if transport.get_extra_info("ssl_object") is not None or transport.get_extra_info("sslcontext") is not None:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None or sock.type != socket.SOCK_STREAM:
        return None
    return sock.fileno()


def in_pieces(chunks: Sequence[Buffer]) -> bool:
    """Whether an answer is too many buffers to hand over in one go (see `send_in_pieces`)."""
    return len(chunks) > IOV_MAX


async def send_in_pieces(writer: asyncio.StreamWriter, chunks: Sequence[Buffer], fd: int | None) -> None:
    """Write `chunks` in order, IOV_MAX at a time, letting the socket drain between them.

    The caller sends nothing else on this connection until it returns. A
    connection that closes meanwhile is left: its remaining bytes have
    nobody to go to.
    """
    for start in range(0, len(chunks), IOV_MAX):
        if writer.transport.is_closing():
            return
        send_chunks(writer, chunks[start:start + IOV_MAX], fd)
        try:
            await writer.drain()
        except ConnectionError:
            return


def send_chunks(writer: asyncio.StreamWriter, chunks: Sequence[Buffer], fd: int | None) -> None:
    """Write `chunks` (at most IOV_MAX: more go through `send_in_pieces`) in order; with a plain socket's
    `fd`, as much as it takes at once with no copy."""
    transport = writer.transport
    if fd is None or len(chunks) < 2:
        writer.writelines(chunks)
        return
    if transport.get_write_buffer_size() or transport.is_closing():
        sent = 0  # bytes already wait in the transport's buffer: these go after them
    else:
        try:
            sent = os.writev(fd, chunks)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            sent = 0  # a broken connection: the transport's own write meets and reports the error
    for chunk in chunks:
        size = len(chunk)
        if sent >= size:
            sent -= size
            continue
        transport.write(memoryview(chunk)[sent:] if sent else chunk)
        sent = 0
