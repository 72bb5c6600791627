"""Where a consumer group's offset reset puts one partition: the rule the `group reset` command and the web
console's reset share, so a dry run in either shows what the other would do.
"""

from __future__ import annotations

from typing import Any


class NoCommittedOffset(Exception):
    """A relative reset (--shift-by) asked of a partition where the group has committed nothing."""


def reset_target(args: Any, where: str, committed: int | None, low: int, high: int, by_time: int | None) -> int:
    """One partition's new offset for the reset `args` asks (--to-earliest, ... as parsed), clamped into the log.

    `by_time` is the first offset at or after args.to_datetime (None: none).
    """
    if args.to_earliest:
        target = low
    elif args.to_latest:
        target = high
    elif args.to_offset is not None:
        target = args.to_offset
    elif args.to_datetime is not None:
        target = high if by_time is None else by_time
    else:
        if committed is None:
            raise NoCommittedOffset(f"cannot shift the offset of {where}: the group has no committed offset there")
        target = committed + args.shift_by
    return min(max(target, low), high)
