"""Durations and sizes as the CLI reads and prints them."""

from __future__ import annotations

import pytest

from kafkacompat.units import format_bytes, format_duration, parse_duration, parse_size


@pytest.mark.parametrize("text, seconds", [
    ("0", 0), ("604800", 604800), ("45s", 45), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600),
    ("7D", 604800),
])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "-1", "7x", "1.5h", "d", "7 days"])
def test_bad_durations(text):
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize("text, count", [
    ("4096", 4096), ("4KB", 4096), ("64MB", 64 << 20), ("64M", 64 << 20), ("64MiB", 64 << 20), ("1GiB", 1 << 30),
    ("1.5g", 3 << 29), ("2tb", 2 << 40), ("100B", 100),
])
def test_sizes_are_binary_whatever_the_spelling(text, count):
    assert parse_size(text) == count


@pytest.mark.parametrize("text", ["", "-4KB", "64XB", "MB", "1,5GB"])
def test_bad_sizes(text):
    with pytest.raises(ValueError, match="invalid size"):
        parse_size(text)


def test_formats_pick_the_largest_whole_unit():
    assert [format_duration(s) for s in (0, 59, 60, 5400, 86400, 604800)] == ["forever", "59s", "1m", "90m", "1d", "7d"]
    assert [format_bytes(n) for n in (0, 1023, 1024, 1536, 64 << 20, 1 << 30)] == [
        "0 B", "1023 B", "1 KiB", "1.5 KiB", "64 MiB", "1 GiB"]
