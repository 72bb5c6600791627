"""Durations and sizes as people type and read them: 7d, 12h, 64MB, 1GiB.

Sizes are binary whatever the spelling (64MB = 64MiB = 64 * 2**20 bytes),
as in MapR's and the JVM's tools, so 1GB partitionlets are the 1 GiB the
store's default reads as.
"""

from __future__ import annotations

import datetime
import re

_DURATION = re.compile(r"(\d+)\s*([smhdw]?)", re.IGNORECASE)
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(|b|[kmgt]i?b?)", re.IGNORECASE)
_BYTES = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_duration(text: str) -> int:
    """Seconds for '604800', '7d', '12h', '30m', '45s' or '2w'; ValueError otherwise."""
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise ValueError(f"invalid duration {text!r}: use seconds or a number with s, m, h, d or w (e.g. 7d)")
    return int(match.group(1)) * _SECONDS[match.group(2).lower()]


def parse_size(text: str) -> int:
    """Bytes for '4096', '64MB', '64M', '1GiB', '1.5g'; ValueError otherwise."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"invalid size {text!r}: use bytes or a number with KB, MB, GB or TB (e.g. 64MB)")
    return int(float(match.group(1)) * _BYTES[match.group(2)[:1].lower()])


def format_duration(seconds: int) -> str:
    """The largest whole unit up to days: 604800 -> '7d', 90 -> '90s', 0 -> 'forever'."""
    if seconds == 0:
        return "forever"
    for unit in ("d", "h", "m"):
        if seconds % _SECONDS[unit] == 0:
            return f"{seconds // _SECONDS[unit]}{unit}"
    return f"{seconds}s"


def format_bytes(count: int) -> str:
    """'512 B', '4 KiB', '1.5 MiB': exact units without decimals."""
    for unit, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if count >= unit:
            value = count / unit
            return f"{value:.0f} {name}" if count % unit == 0 else f"{value:.1f} {name}"
    return f"{count} B"


def format_time_ms(epoch_ms: int) -> str:
    """UTC timestamp to the second, or '-' for none."""
    if epoch_ms <= 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
