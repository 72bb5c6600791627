"""Consumer groups: Kafka's classic group protocol and committed offsets."""

from .coordinator import GroupCoordinator, GroupSummary, JoinRequest, JoinResult, SyncResult
from .group import GroupState

__all__ = ["GroupCoordinator", "GroupState", "GroupSummary", "JoinRequest", "JoinResult", "SyncResult"]
