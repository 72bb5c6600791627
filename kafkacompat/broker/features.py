"""Feature levels: what ApiVersions (v3+) reports and UpdateFeatures changes, as Kafka 4.1 does.

Kafka finalizes feature levels cluster-wide; clients and tools gate
behaviour on them (a transaction.version of 2 makes the Java producer use
KIP-890's second protocol, group.version 1 opens KIP-848 consumer groups,
share.version 1 share groups). So the levels are kept in the store, beside
the dynamic broker configs: they survive a restart, and on a PostgreSQL
store every broker of the cluster reads the same ones. Until
`kafka-features` changes a level, the operator's setting
(`transaction_version`, `share_version`) or Kafka 4.1's default for a new
cluster is in force, as `kafka-storage format --feature` sets it on Kafka.

Updates are checked as Kafka's FeatureControlManager checks them (its
messages too), and the first refusal fails the whole request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Mapping, Sequence

from kio.schema.errors import ErrorCode

from kafkacompat.storage import Store

from ..cluster.membership import java_string_hash
from ..config import BrokerConfig

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
ELR_VERSION = "eligible.leader.replicas.version"

METADATA_VERSION_4_1_IV1 = 27
METADATA_VERSION_3_3_IV3 = 7  # the oldest Kafka 4.x supports
# Metadata versions (levels 7-27) whose records differ from the one before: a downgrade across one
# of them might lose metadata, so Kafka refuses it (MetadataVersion.didMetadataChange).
_METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23})
# (feature, level) -> the levels of other features it needs (Kafka's FeatureVersion.dependencies)
_DEPENDENCIES: dict[tuple[str, int], dict[str, int]] = {
    (ELR_VERSION, 1): {METADATA_VERSION: 23},
    (KRAFT_VERSION, 1): {METADATA_VERSION: 21},
}
# Features Kafka 4.1 knows but does not offer yet: level 0 may be set, as on Kafka.
_KNOWN_UNOFFERED = frozenset({"streams.version"})
_LEVEL_KEY = "feature.level:"  # store setting per feature changed by UpdateFeatures
_EPOCH_KEY = "feature.epoch"
FIRST_EPOCH = 1


class UpgradeType(enum.IntEnum):
    """UpdateFeatures' upgrade_type (v1+); any other code is Kafka's UNKNOWN."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclasses.dataclass(frozen=True, slots=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """Kafka's INVALID_UPDATE_VERSION with its message, for the first update refused."""

    error: ErrorCode
    message: str


def supported(single_node: bool = True) -> dict[str, tuple[int, int]]:
    """name -> (min, max) level this broker could run at.

    transaction.version stops at 1 on a cluster of many brokers: there a partition's
    leader cannot yet add its partition to a transaction another broker coordinates,
    which transactions v2 (Produce v12 joins the partition implicitly) asks of it.
    kraft.version is 1 as on a Kafka formatted --standalone (the quickstart's way);
    it cannot change, as Kafka's KRaft version can only go up.
    """
    return {
        ELR_VERSION: (0, 1),
        GROUP_VERSION: (0, 1),
        KRAFT_VERSION: (0, 1),
        METADATA_VERSION: (METADATA_VERSION_3_3_IV3, METADATA_VERSION_4_1_IV1),
        SHARE_VERSION: (0, 1),
        TRANSACTION_VERSION: (0, 2 if single_node else 1),
    }


def _defaults(config: BrokerConfig) -> dict[str, int]:
    """The levels of a new Kafka 4.1 cluster, with the operator's transaction and share versions."""
    return {
        ELR_VERSION: 1,
        GROUP_VERSION: 1,
        KRAFT_VERSION: 1,
        METADATA_VERSION: METADATA_VERSION_4_1_IV1,
        SHARE_VERSION: config.share_version,
        TRANSACTION_VERSION: config.transaction_version,
    }


def java_hash_order(names: Sequence[str]) -> list[str]:
    """`names` in the order a java.util.HashMap holding them iterates: Kafka's controller
    checks the updates of one request in that order and reports the first refusal."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=bucket)  # stable: a bucket keeps insertion order, as its chain does


def _metadata_changed(high: int, low: int) -> bool:
    """Whether some metadata version above `low`, up to `high`, changed the records."""
    return any(level in _METADATA_CHANGED for level in range(low + 1, high + 1))


class FeatureLevels:
    """The finalized levels in force and their epoch, read from the store on every call
    (another broker of the cluster may have changed them)."""

    def __init__(self, config: BrokerConfig, store: Store, single_node: bool) -> None:
        self._config = config
        self._store = store
        self.single_node = single_node
        self._turn = asyncio.Lock()  # one update at a time: each reads the epoch it bumps

    def supported(self) -> dict[str, tuple[int, int]]:
        return supported(self.single_node)

    def level(self, name: str) -> int:
        """The level in force (0 for a feature that is off or unknown), capped by what is served."""
        stored = self._store.settings().get(_LEVEL_KEY + name)
        level = int(stored) if stored is not None else _defaults(self._config).get(name, 0)
        return min(level, self.supported().get(name, (0, 0))[1])

    def finalized(self) -> dict[str, int]:
        """name -> level of the features in force; those at level 0 are left out, as Kafka leaves them out."""
        levels = {name: self.level(name) for name in sorted(self.supported())}
        return {name: level for name, level in levels.items() if level > 0}

    @property
    def epoch(self) -> int:
        """finalized_features_epoch: goes up with every update, also across restarts."""
        return int(self._store.settings().get(_EPOCH_KEY, FIRST_EPOCH))

    def check(self, updates: Sequence[FeatureUpdate], controller_id: int) -> Refusal | None:
        """The first update Kafka's controller would refuse (HashMap order), or None."""
        by_name = {u.name: u for u in updates}
        proposed = {**self.finalized(), METADATA_VERSION: self.level(METADATA_VERSION),
                    **{u.name: u.level for u in updates}}
        for name in java_hash_order(list(by_name)):
            reason = self._refusal(by_name[name], proposed, controller_id)
            if reason is not None:
                return Refusal(ErrorCode.invalid_update_version, reason)
        return None

    def _refusal(self, update: FeatureUpdate, proposed: Mapping[str, int], controller_id: int) -> str | None:
        name, new = update.name, update.level

        def invalid(why: str) -> str:
            return f"Invalid update version {new} for feature {name}. {why}"

        if update.upgrade_type not in tuple(UpgradeType):
            return invalid("The controller does not support the given upgrade type.")
        current = self.level(name)
        if new < 0:
            return invalid("A feature version cannot be less than 0.")
        low, high = self.supported().get(name, (0, 0))
        if not low <= new <= high:
            what = f"Local controller {controller_id}"
            return invalid(f"{what} does not support this feature." if high == 0 else
                           f"{what} only supports versions {low}-{high}")
        upgrade = update.upgrade_type == UpgradeType.UPGRADE
        if new < current and upgrade:
            return invalid("Can't downgrade the version of this feature without setting the upgrade type to "
                           "either safe or unsafe downgrade.")
        if new > current and not upgrade:
            return invalid("Can't downgrade to a newer version.")
        if name == METADATA_VERSION:
            if new < current and _metadata_changed(current, new):
                why = ("Unsafe metadata downgrade is not supported in this version."
                       if update.upgrade_type == UpgradeType.UNSAFE_DOWNGRADE else
                       "Refusing to perform the requested downgrade because it might delete metadata information.")
                return f"Invalid metadata.version {new}. {why}"
            return None
        if name == KRAFT_VERSION:
            return None if upgrade or new == current else invalid("Can't downgrade the version of this feature.")
        if name not in self.supported() and name not in _KNOWN_UNOFFERED:
            return invalid(f"Feature {name} not found.")
        for needed, least in _DEPENDENCIES.get((name, new), {}).items():
            if proposed.get(needed, 0) < least:
                return invalid(f"{name} could not be set to {new} because it depends on {needed} level {least}")
        return None

    async def update(self, updates: Sequence[FeatureUpdate], validate_only: bool,
                     controller_id: int) -> Refusal | None:
        """Check every update, then (unless validate_only) keep them all and bump the epoch at once.

        Brokers of one cluster updating at the same instant may both write the same next epoch:
        the levels stay right, the epoch goes up by one for the two."""
        async with self._turn:
            refused = self.check(updates, controller_id)
            if refused is not None or validate_only or not updates:
                return refused
            changes: dict[str, str | None] = {_LEVEL_KEY + u.name: str(u.level) for u in updates
                                              if u.name != KRAFT_VERSION}  # kraft.version stays where it is
            changes[_EPOCH_KEY] = str(self.epoch + 1)
            await self._store.set_settings(changes)
        return None
