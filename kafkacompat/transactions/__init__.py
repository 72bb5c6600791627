"""Transactions: Kafka's transaction coordinator and per-partition transaction state."""

from .coordinator import TransactionCoordinator
from .metadata import TransactionMetadata, TxnState
from .partition_state import AbortedBatches, AbortedTxn, PartitionTxns

__all__ = ["AbortedBatches", "AbortedTxn", "PartitionTxns", "TransactionCoordinator", "TransactionMetadata", "TxnState"]
