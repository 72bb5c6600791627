"""Named storage errors; the broker maps each to a Kafka error code."""


class StorageError(Exception):
    """Base of every error the store raises on purpose."""


class InvalidPathError(StorageError):
    """A stream path that breaks the naming rules."""


class InvalidTopicNameError(StorageError):
    """A topic name that breaks the naming rules."""


class StreamExistsError(StorageError):
    pass


class UnknownStreamError(StorageError):
    pass


class TopicExistsError(StorageError):
    pass


class UnknownTopicError(StorageError):
    pass


class InvalidPartitionsError(StorageError):
    """A partition count below 1, or an attempt to shrink a topic."""


class InvalidPolicyError(StorageError):
    pass


class OffsetOutOfRangeError(StorageError):
    pass


class OffsetMismatchError(StorageError):
    """An append at a stated offset that is not the partition's high watermark (a gap or an overlap)."""

    def __init__(self, message: str, high_watermark: int) -> None:
        super().__init__(message)
        self.high_watermark = high_watermark


class NotLeaderError(StorageError):
    """An append made under a leader epoch the partition has moved past (a store shared by brokers).

    The broker that made it was deposed while the append was in flight;
    nothing of it was stored. `epoch` is the partition's leader epoch now
    (-1 when unknown).
    """

    def __init__(self, message: str, epoch: int) -> None:
        super().__init__(message)
        self.epoch = epoch


class TransactionEndedError(StorageError):
    """A transactional batch whose producer's transaction in the partition ended while the batch waited to
    be stored (a marker of that producer was stored at or after the offset the append named): stored after
    the marker, it would join the producer's next transaction there. Nothing of it was stored."""


class RequesterGoneError(StorageError):
    """The client that sent the batch closed its connection before the batch was committed: it takes the
    request for failed and resends it, so this copy is not stored (a producer without idempotence would keep
    both). Nothing of it was stored; the answer reaches nobody."""


class CorruptBatchError(StorageError):
    """A batch that fails its length, offset or CRC-32C check."""


class StorageFullError(StorageError):
    """No volume has room; nothing of the failed write was kept."""


class StorageUnavailableError(StorageError):
    """A partition (or part of it) that cannot be served: damaged or unreadable files.

    The broker answers KAFKA_STORAGE_ERROR; the reason was logged once when
    the damage was found.
    """


class DamagedRangeError(StorageUnavailableError):
    """Offsets [first, resume_at) sit in a quarantined (damaged or lost) range."""

    def __init__(self, message: str, first: int, resume_at: int) -> None:
        super().__init__(message)
        self.first = first
        self.resume_at = resume_at
