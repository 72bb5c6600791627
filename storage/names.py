"""Naming rules for stream paths and topic names.

Stream paths are absolute, slash-separated, and their components use
letters, digits, '_' and '-' only: with no '.' in a path, the broker can map
`/a/b:topic` to a Kafka-legal alias without collisions.
"""

import re

from .errors import InvalidPathError, InvalidTopicNameError

MAX_PATH_LENGTH = 255
MAX_TOPIC_LENGTH = 249
_COMPONENT = re.compile(r"[A-Za-z0-9_-]+")
_TOPIC = re.compile(r"[A-Za-z0-9._-]+")


def check_stream_path(path: str) -> str:
    """Return the path if valid, else raise InvalidPathError saying why."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise InvalidPathError(f"stream path {path!r} must be absolute (start with '/')")
    if len(path) > MAX_PATH_LENGTH:
        raise InvalidPathError(f"stream path {path!r} is longer than {MAX_PATH_LENGTH} characters")
    parts = path[1:].split("/")
    for part in parts:
        if not _COMPONENT.fullmatch(part):
            raise InvalidPathError(
                f"stream path {path!r}: component {part!r} may use only letters, digits, '_' and '-'"
            )
    return path


def check_topic_name(name: str) -> str:
    """Return the name if valid, else raise InvalidTopicNameError with Kafka's own message
    (Topic.validate), so clients and tools show the same text on both brokers."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicNameError("Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise InvalidTopicNameError(f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicNameError(
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length {MAX_TOPIC_LENGTH}")
    if not _TOPIC.fullmatch(name):
        raise InvalidTopicNameError(
            f"Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )
    return name
