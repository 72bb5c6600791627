"""The records every scenario sends, so every client family is held to the same data.

Record i of a run with prefix P has key P+"k"+i, value P+"v"+i and the
same two headers (src, trace) in that order: kcat can only set one header
set per run. Drivers return consumed records as `Received`.
"""

from __future__ import annotations

import dataclasses

CODECS = ("gzip", "snappy", "lz4", "zstd")
HEADERS = (("src", "compat"), ("trace", "0af7651916cd43dd8448eb211c80319c"))


@dataclasses.dataclass(frozen=True)
class Received:
    partition: int
    offset: int
    key: str | None
    value: str | None
    headers: tuple[tuple[str, str], ...] = ()
    timestamp: int = -1

    @classmethod
    def from_json(cls, item: dict) -> "Received":
        return cls(
            partition=item["p"], offset=item["o"], key=item.get("k"), value=item.get("v"),
            headers=tuple((h[0], h[1]) for h in item.get("h", ())), timestamp=item.get("ts", -1),
        )


def key(prefix: str, i: int) -> str:
    return f"{prefix}k{i}"


def value(prefix: str, i: int) -> str:
    return f"{prefix}v{i}"


def headers(i: int) -> tuple[tuple[str, str], ...]:
    """The headers of record i (the same for every record, see above)."""
    return HEADERS


def expected(prefix: str, n: int, start: int = 0) -> list[tuple[str, str]]:
    """(key, value) of records start..n-1 in the order they were sent."""
    return [(key(prefix, i), value(prefix, i)) for i in range(start, n)]


def key_values(records: list[Received]) -> list[tuple[str | None, str | None]]:
    return [(r.key, r.value) for r in records]
