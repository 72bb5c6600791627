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


class CorruptBatchError(StorageError):
    """A batch that fails its length, offset or CRC-32C check."""


class StorageFullError(StorageError):
    """No volume has room; nothing of the failed write was kept."""
