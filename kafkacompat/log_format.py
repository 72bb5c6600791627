"""The broker's log output: readable lines, or JSON lines for log shippers.

`--log-format json` writes one JSON object per record (time, level,
logger, message, and the traceback when there is one), so Fluent Bit,
Vector or Logstash take records whole instead of guessing where a
multi-line traceback ends. Twenty lines of the standard library's json
do it; a JSON-logging package would be one more dependency for the same.
"""

from __future__ import annotations

import json
import logging
import sys
import time

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line; times in UTC."""

    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["traceback"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str, fmt: str) -> None:
    """Log to stderr at `level`, as text or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
