"""Client quotas: producer_byte_rate and consumer_byte_rate per user and client id, enforced as Kafka does.

Quotas are set with AlterClientQuotas (`kafka-configs --entity-type
clients/users`), kept in the store's settings and matched as Kafka matches
them, most specific first: (user, client id), (user, default client),
user, (default user, client id), (default user, default client), default
user, client id, default client. Connections without SASL are the user
ANONYMOUS, as on Kafka.

Rates are measured as Kafka measures them: 11 one-second samples, the
elapsed time counted as at least 10 s. A request that takes the rate over
its bound is answered with throttle_time_ms = (rate - bound) / bound x
window, and the connection reads nothing more for that long (Kafka mutes
the channel); a throttled fetch is answered without records and its bytes
are not counted. With no quota set, the produce and fetch paths pay one
attribute check.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence

from kafkacompat.storage import Store

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCE, FETCH = "producer_byte_rate", "consumer_byte_rate"
ENFORCED = (PRODUCE, FETCH)
NOT_ENFORCED = ("request_percentage", "controller_mutation_rate", "connection_creation_rate")
ANONYMOUS = "ANONYMOUS"
SAMPLES, SAMPLE_MS = 11, 1000  # Kafka's quota.window.num and quota.window.size.seconds
_PREFIX = "client-quota:"

Entity = tuple[tuple[str, str | None], ...]  # sorted (entity type, name or None for the default)


class QuotaError(ValueError):
    """A quota change Kafka would refuse (INVALID_REQUEST)."""


def entity_of(parts: Sequence[tuple[str, str | None]]) -> Entity:
    types = [kind for kind, _ in parts]
    if not parts or len(set(types)) != len(types):
        raise QuotaError("Invalid empty or duplicated quota entity")
    unknown = [kind for kind in types if kind not in (USER, CLIENT_ID, IP)]
    if unknown:
        raise QuotaError(f"Unexpected quota entity type: {unknown[0]}")
    if IP in types and len(types) > 1:
        raise QuotaError("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
    return tuple(sorted(parts))


@dataclasses.dataclass(slots=True)
class _Rate:
    """Bytes per second over Kafka's sampled window."""

    windows: list[tuple[int, float]] = dataclasses.field(default_factory=list)  # (window start ms, bytes)

    def record(self, now_ms: int, amount: float) -> None:
        start = now_ms - now_ms % SAMPLE_MS
        if self.windows and self.windows[-1][0] == start:
            self.windows[-1] = (start, self.windows[-1][1] + amount)
        else:
            self.windows.append((start, amount))
        cutoff = start - (SAMPLES - 1) * SAMPLE_MS
        while self.windows[0][0] < cutoff:
            self.windows.pop(0)

    def rate_and_window(self, now_ms: int) -> tuple[float, float]:
        """(bytes per second, the elapsed ms they are counted over)."""
        if not self.windows:
            return 0.0, (SAMPLES - 1) * SAMPLE_MS
        elapsed = max(now_ms - self.windows[0][0], (SAMPLES - 1) * SAMPLE_MS)
        return sum(amount for _, amount in self.windows) * 1000 / elapsed, elapsed


class ClientQuotas:
    """The quotas of the store's settings, matched and enforced here. Rebuilt whenever the settings
    changed (their settings_version moved), so a quota set through another broker of the cluster, or
    through worker 0 of `serve --workers N`, is enforced here too, not only after a restart."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._version = -1
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._matched: dict[tuple[str, str, str], tuple[Entity, float] | None] = {}
        self._rates: dict[tuple[Entity, str], _Rate] = {}
        self._active = False
        self._current()

    @property
    def active(self) -> bool:
        """Whether any quota is enforced (with none, produce and fetch pay this check alone)."""
        self._current()
        return self._active

    def _current(self) -> None:
        version = self._store.settings_version()
        if version == self._version:
            return
        self._version = version
        quotas: dict[Entity, dict[str, float]] = {}
        for key, value in self._store.settings().items():
            if key.startswith(_PREFIX):
                parts, name = json.loads(key[len(_PREFIX):])
                quotas.setdefault(tuple(tuple(p) for p in parts), {})[name] = float(value)
        if quotas == self._quotas:
            return  # another setting changed: the rates measured so far stand
        self._quotas = quotas
        self._matched.clear()
        self._rates.clear()
        self._active = any(name in ENFORCED for values in quotas.values() for name in values)

    # --- admin ---------------------------------------------------------

    def describe(self, match: Sequence[tuple[str, int, str | None]], strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """Entities matching every (type, match type, name) filter: 0 exact name, 1 the default, 2 any."""
        self._current()
        found = []
        for entity, values in sorted(self._quotas.items(), key=lambda item: str(item[0])):
            named = dict(entity)
            if strict and set(named) != {kind for kind, _, _ in match}:
                continue
            ok = all(
                kind in named and (how == 2 or (how == 1 and named[kind] is None) or (how == 0 and named[kind] == name))
                for kind, how, name in match
            )
            if ok and values:
                found.append((entity, dict(values)))
        return found

    def check(self, entity: Entity, ops: Mapping[str, float | None]) -> None:
        for name, value in ops.items():
            if name in NOT_ENFORCED:
                raise QuotaError(f"{name} is not enforced by this broker")
            if name not in ENFORCED:
                raise QuotaError(f"Invalid configuration key {name}")
            if IP in dict(entity):
                raise QuotaError(f"{name} does not apply to ip entities")
            if value is not None and value <= 0:
                raise QuotaError(f"Invalid value {value} for {name}: must be greater than 0")

    async def alter(self, entity: Entity, ops: Mapping[str, float | None]) -> None:
        """Set (a value) or remove (None) quotas of one entity, durably."""
        await self._store.set_settings({
            _PREFIX + json.dumps([entity, name]): (None if value is None else repr(value)) for name, value in ops.items()
        })
        self._current()

    # --- enforcement ---------------------------------------------------

    def _match(self, user: str, client_id: str, kind: str) -> tuple[Entity, float] | None:
        key = (user, client_id, kind)
        if key not in self._matched:
            self._matched[key] = None
            for candidate in (
                ((CLIENT_ID, client_id), (USER, user)), ((CLIENT_ID, None), (USER, user)), ((USER, user),),
                ((CLIENT_ID, client_id), (USER, None)), ((CLIENT_ID, None), (USER, None)), ((USER, None),),
                ((CLIENT_ID, client_id),), ((CLIENT_ID, None),),
            ):
                bound = self._quotas.get(candidate, {}).get(kind)
                if bound is not None:
                    # the user's own entity is shared by all its clients unless a client id is named
                    shared: Entity = tuple((t, user if t == USER else client_id) for t, _ in candidate)
                    self._matched[key] = (shared, bound)
                    break
        return self._matched[key]

    def record(self, client_id: str | None, kind: str, amount: int, user: str = ANONYMOUS) -> int:
        """Count `amount` bytes; the throttle time in ms (0 when within the quota)."""
        matched = self._match(user, client_id or "", kind)
        if matched is None:
            return 0
        entity, bound = matched
        now = int(time.time() * 1000)
        rate = self._rates.setdefault((entity, kind), _Rate())
        rate.record(now, amount)
        observed, window = rate.rate_and_window(now)
        return int((observed - bound) / bound * window) if observed > bound else 0

    def unrecord(self, client_id: str | None, kind: str, amount: int, user: str = ANONYMOUS) -> None:
        """Take back bytes counted for an answer that was not sent (a throttled fetch)."""
        matched = self._match(user, client_id or "", kind)
        if matched is not None:
            self._rates[(matched[0], kind)].record(int(time.time() * 1000), -amount)
