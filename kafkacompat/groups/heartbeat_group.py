"""What a member of a KIP-848-style group is, whatever it holds (partitions or Streams tasks).

Consumer groups (KIP-848) and Streams groups (KIP-1071) are both driven by
the member's heartbeat: a member walks to its target one reconciliation
step per heartbeat and is fenced by two timers, its session and its
rebalance (revocation) timeout. The members of both kinds share this base
so that the timers and the "reconciled" test are written once.
"""

from __future__ import annotations

import asyncio
import enum
from typing import ClassVar


class HeartbeatMember:
    """Mixin of the members of heartbeat-driven groups (a slotted dataclass provides the fields)."""

    __slots__ = ()

    STABLE: ClassVar[enum.Enum]  # the member state that means "caught up with its target"
    member_id: str
    state: enum.Enum
    member_epoch: int
    rebalance_timeout_ms: int
    session_timer: asyncio.TimerHandle | None
    rebalance_timer: asyncio.TimerHandle | None

    def cancel_timers(self) -> None:
        for name in ("session_timer", "rebalance_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is self.STABLE and self.member_epoch == epoch
