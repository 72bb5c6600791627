"""Consumer groups: the classic group coordinator and committed offsets (cursors)."""

from .coordinator import CONSUMER_PROTOCOL_TYPE, GroupCoordinator
from .state import Group, GroupState, JoinResult, SyncResult

__all__ = ["CONSUMER_PROTOCOL_TYPE", "Group", "GroupCoordinator", "GroupState", "JoinResult", "SyncResult"]
