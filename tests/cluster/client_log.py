"""A client's log lines as its application sees them, for a test to wait on what the client was told."""

from __future__ import annotations

import logging


class ClientLog(logging.Handler):
    """The lines librdkafka hands a client's `logger` (its debug lines too: the logger is set to DEBUG)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.logger = logging.getLogger(name)
        self.logger.addHandler(self)
        self.logger.setLevel(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def close(self) -> None:
        self.logger.removeHandler(self)
        super().close()
