"""A TCP relay one replica link runs through, so the nemesis can cut that link's network and nothing else.

`stream replica pause` is the operator stopping a link politely; a network
cut is the link's connection dying under it, mid-request or mid-batch, while
both clusters stay up and every other link and client goes on. Loopback has
no partitions to make, so each link's replica address is a relay's port
(`127.0.0.1:PORT/chaos`) that forwards to the destination cluster: `sever`
resets every connection through it and refuses new ones until `mend`.
Toxiproxy does this as a separate Go server, which the project does not ship;
a threaded relay of sixty lines is all a campaign needs.
"""

from __future__ import annotations

import socket
import struct
import threading

BUFFER = 65536


class LinkProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = ("127.0.0.1", target_port)
        self.server = socket.create_server((host, port))
        self.port: int = self.server.getsockname()[1]
        self.cut = threading.Event()
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()
        threading.Thread(target=self._accept, name=f"chaos-link-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            if self.cut.is_set():
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:  # the destination is down: the link sees its connection end at once
                _reset(client)
                continue
            upstream.settimeout(None)
            with self.lock:
                self.open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(BUFFER):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self.lock:
                self.open -= {source, sink}
            _reset(source)
            _reset(sink)

    def sever(self) -> None:
        """Reset every connection through the relay and refuse new ones, until `mend`."""
        self.cut.set()
        with self.lock:
            cut, self.open = self.open, set()
        for conn in cut:
            _reset(conn)

    def mend(self) -> None:
        self.cut.clear()

    def close(self) -> None:
        self.server.close()
        self.sever()


def _reset(conn: socket.socket) -> None:
    """Close with an RST (linger 0), as a dropped path looks to the peer; the shutdown first wakes the relay's
    other thread blocked reading this socket."""
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()
