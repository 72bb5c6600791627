"""KIP-848 server-side topic regexes (subscribed_topic_regex), in RE2 syntax as Kafka's RE2/J.

Kafka compiles the regex with RE2/J and subscribes a member to every topic
whose whole name matches. RE2 here is Google's own library (google-re2),
the engine RE2/J ports, so the same patterns are accepted and refused
(no backreferences, no lookaround).
"""

from __future__ import annotations

import functools

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered, not logged by RE2


class InvalidRegex(ValueError):
    pass


@functools.lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> "re2._Regexp":
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise InvalidRegex(reason.decode() if isinstance(reason, bytes) else str(reason)) from None


def matches(pattern: str, topic: str) -> bool:
    return compile_regex(pattern).fullmatch(topic) is not None
