"""Transactions: Kafka's transaction coordinator and per-partition transaction state."""

from .coordinator import TransactionCoordinator
from .metadata import TransactionMetadata, TxnState
from .partition_state import AbortedTxn, PartitionTxns

__all__ = ["AbortedTxn", "PartitionTxns", "TransactionCoordinator", "TransactionMetadata", "TxnState"]
