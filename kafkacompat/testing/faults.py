"""Faults a test injects into a running broker, seen by any client on the wire.

Users test their retry paths with these: the next N requests of an API fail
with a Kafka error code, answers are delayed, connections are dropped. The
connection layer looks the request's API key up in `Faults.rules` (one dict
lookup, nothing more while no fault is set) and hands matching requests to
`apply`.

An injected error must not have side effects (a failed produce appends
nothing, as with NOT_LEADER_OR_FOLLOWER on Kafka), so APIs that change state
get an error answer built from the request alone; read-only APIs run their
real handler and get every error code of its answer replaced. Which is which,
and the answer's shape, each handler module declares (its `API`); the
answers themselves are built by protocol.error_answers.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import logging
import threading
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from kafkacompat.protocol.error_answers import error_from_request, with_error
from kafkacompat.protocol.versions import api_name

from ..handlers import ERROR_ANSWERS, HANDLERS
from ..handlers.common import NO_RESPONSE, CloseConnection

log = logging.getLogger(__name__)


class Kind(enum.Enum):
    ERROR = "error"
    DELAY = "delay"
    DISCONNECT = "disconnect"


@dataclasses.dataclass(slots=True)
class Rule:
    kind: Kind
    remaining: int | None  # None: until cleared
    error: ErrorCode = ErrorCode.none
    seconds: float = 0.0
    after_handling: bool = False


def api_key_of(api: str | int) -> int:
    """An API key from its number or name ("Produce", "list_offsets", "ListOffsets")."""
    if isinstance(api, int):
        return api
    wanted = "".join(c for c in api.lower() if c.isalnum())
    for key, name in api_key_map.items():
        if name.replace("_", "") == wanted:
            return key
    raise ValueError(f"unknown Kafka API {api!r}")


def error_code_of(error: ErrorCode | int | str) -> ErrorCode:
    """An ErrorCode from the enum, its number or its name ("NOT_LEADER_OR_FOLLOWER")."""
    if isinstance(error, ErrorCode):
        return error
    if isinstance(error, int):
        return ErrorCode(error)
    try:
        return ErrorCode[error.lower()]
    except KeyError:
        raise ValueError(f"unknown Kafka error code {error!r}") from None


class Faults:
    """The faults set on one broker. Safe to change from any thread."""

    def __init__(self) -> None:
        self.rules: dict[int, list[Rule]] = {}
        self._fired: collections.Counter[int] = collections.Counter()
        self._lock = threading.Lock()

    def fail(self, api: str | int, error: ErrorCode | int | str, count: int | None = 1) -> None:
        """The next `count` requests of `api` (None: all, until cleared) answer `error`."""
        key = api_key_of(api)
        if key not in ERROR_ANSWERS:
            raise ValueError(f"no injected error answers for {api_name(key)}")
        self._add([key], Rule(Kind.ERROR, count, error=error_code_of(error)))

    def delay(self, api: str | int | None, seconds: float, count: int | None = None) -> None:
        """Answer the next `count` requests of `api` (None: every API) `seconds` late."""
        self._add(self._keys(api), Rule(Kind.DELAY, count, seconds=seconds))

    def disconnect(
        self, api: str | int | None, count: int | None = 1, *, after_handling: bool = False
    ) -> None:
        """Close the connection on the next `count` requests of `api` (None: any API).

        By default the request is dropped unhandled (a broker gone before it
        acted). With after_handling=True it takes effect and only the answer
        is lost, the case that makes non-idempotent producers write twice.
        """
        self._add(self._keys(api), Rule(Kind.DISCONNECT, count, after_handling=after_handling))

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
            self._fired.clear()

    def fired(self, api: str | int) -> int:
        """How many requests of `api` a fault has been applied to since the last clear()."""
        return self._fired[api_key_of(api)]

    def take(self, api_key: int) -> Rule | None:
        """The rule to apply to this request, counting it down (called by the broker)."""
        with self._lock:
            rules = self.rules.get(api_key)
            if not rules:
                return None
            rule = rules[0]
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining <= 0:
                    for other in list(self.rules):  # a rule for every API is shared
                        pending = self.rules[other]
                        if rule in pending:
                            pending.remove(rule)
                        if not pending:
                            del self.rules[other]
            self._fired[api_key] += 1
            return rule

    async def apply(self, rule: Rule, ctx: Any, handler: Any, request: Any) -> Any:
        """Handle one request under `rule` (called by the connection)."""
        return await apply(rule, ctx, handler, request)

    def _keys(self, api: str | int | None) -> list[int]:
        return list(HANDLERS) if api is None else [api_key_of(api)]

    def _add(self, keys: list[int], rule: Rule) -> None:
        if rule.remaining is not None and rule.remaining <= 0:
            raise ValueError("count must be positive, or None for no limit")
        with self._lock:
            for key in keys:
                self.rules.setdefault(key, []).append(rule)


async def apply(rule: Rule, ctx: Any, handler: Any, request: Any) -> Any:
    """Handle one request under a fault; returns what a handler returns."""
    key = ctx.header.api_key
    label = f"injected fault on {api_name(key)}"
    if rule.kind is Kind.DISCONNECT and not rule.after_handling:
        raise CloseConnection(f"{label}: connection dropped before handling")
    shape = ERROR_ANSWERS.get(key)  # state-changing APIs are answered from the request (except versions refused)
    if rule.kind is Kind.ERROR and shape and shape.changes_state and ctx.version >= shape.handler_refuses_below:
        log.info("%s: answering %s without handling", label, rule.error.name)
        if getattr(request, "acks", None) == 0:
            raise CloseConnection(f"{label}: acks=0 produce failed")  # as Kafka tells acks=0
        return error_from_request(shape, key, ctx.version, request, rule.error)
    answer = await handler.handle(ctx, request)
    if rule.kind is Kind.DISCONNECT:
        if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
            await answer
        raise CloseConnection(f"{label}: connection dropped after handling")
    if answer is NO_RESPONSE:
        return answer
    return _later(rule, answer)


async def _later(rule: Rule, answer: Any) -> Any:
    body = await answer if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future) else answer
    if rule.kind is Kind.DELAY:
        await asyncio.sleep(rule.seconds)
        return body
    if isinstance(body, (bytes, bytearray)):  # a pre-encoded legacy answer: leave it
        return body
    if isinstance(body, list):  # Metadata of 1,000+ topics, encoded in slices: no entity to rewrite
        log.warning("injected fault: %s not injected into a pre-encoded answer of %d buffers", rule.error.name,
                    len(body))
        return body
    return with_error(body, rule.error)
