"""Times as people type them on the console: an ISO date and time (UTC unless it says), or milliseconds."""

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

