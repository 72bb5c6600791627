"""Units as people read and type them on the console: times (UTC), durations (7d, not 604800)."""

from __future__ import annotations

import datetime


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from `text`: a whole number of ms, or an ISO date and time (UTC unless it says)."""
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not a time: give 2026-01-31T12:00:00 (UTC) or milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def human_duration(seconds: float | None) -> str:
    """A duration as the CLI writes a ttl: 7d, 12h, 90m (the largest whole unit), 45s; 0 or None: forever."""
    if not seconds:
        return "forever"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"
