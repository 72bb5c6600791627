"""The broker's HTTP server: console, REST proxy, /metrics and /health, beside the Kafka listeners.

It runs on the broker's event loop and reads the broker's own Cluster (no
second copy of state); BrokerServer starts it before opening the store (so
/health/ready can say "not yet") and stops it last. With http_tls it
serves HTTPS with the SSL listeners' certificate (and, for mTLS logins,
requires client certificates signed by their CA).
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING

from aiohttp import web

from ..security.tls import server_context
from .app import build_app

if TYPE_CHECKING:
    from .common import ServedBroker

log = logging.getLogger(__name__)


class HttpListenError(OSError):
    """The HTTP server cannot bind its address (told apart from the Kafka listener's failures)."""


class HttpServer:
    """aiohttp's runner and TCP site for one broker: `await start()`, `await stop()`."""

    def __init__(self, broker: "ServedBroker", host: str, port: int) -> None:
        self._runner = web.AppRunner(build_app(broker), access_log=None, handle_signals=False)
        self._config = broker.config
        self._host = host
        self._port = port
        self._site: web.TCPSite | None = None

    @property
    def port(self) -> int | None:
        """The bound port (useful with port 0); None until the server listens."""
        if self._site is None:
            return None
        return self._runner.addresses[0][1]

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, reuse_address=True,
                           ssl_context=self._tls_context())
        try:
            await site.start()
        except BaseException as exc:
            await self._runner.cleanup()
            if isinstance(exc, OSError):
                raise HttpListenError(exc.errno, exc.strerror or str(exc)) from exc
            raise
        self._site = site  # only now: `port` is read by others while start() runs
        log.info("HTTP server (console, REST, /metrics, /health) at %s://%s:%d",
                 "https" if self._config.http_tls else "http", self._host, self.port)

    def _tls_context(self) -> ssl.SSLContext | None:
        """HTTPS with the SSL listeners' certificate; client certificates required for mTLS logins."""
        config = self._config
        if not config.http_tls:
            return None
        context = server_context(config)
        context.verify_mode = ssl.CERT_REQUIRED if config.http_authentication == "mtls" else ssl.CERT_NONE
        return context

    async def stop(self) -> None:
        await self._runner.cleanup()
        self._site = None
