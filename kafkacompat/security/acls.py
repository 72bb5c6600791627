"""Kafka ACLs: bindings, filters with Kafka's matching rules, and their durable table.

The codes are Kafka's (org.apache.kafka.common.acl / resource), so the
CreateAcls, DescribeAcls and DeleteAcls handlers pass them straight through.
Bindings are kept in a state table of the default stream, so a grant made
through any admin client survives a restart and counts at once.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Iterator
from typing import Any

from kafkacompat.storage import Store

ACL_TABLE = "acls"
CLUSTER_NAME = "kafka-cluster"  # the only name a CLUSTER resource has
WILDCARD = "*"  # a LITERAL resource name or host that matches every one
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def from_code(kind: type[enum.IntEnum], code: int) -> Any:
    """The member of one of these enums for a wire code; a code this broker does not know is UNKNOWN, as in Kafka."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


# An ALLOW of these also allows the key, as Kafka's authorizer implies DESCRIBE and DESCRIBE_CONFIGS.
IMPLIED_BY = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}


@dataclasses.dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not do what (operation) to which resources (pattern)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @property
    def key(self) -> str:
        """The binding's key in the state table: the same binding is stored once."""
        text = "\x00".join(map(str, (int(self.resource_type), self.resource_name, int(self.pattern_type),
                                      self.principal, self.host, int(self.operation), int(self.permission))))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def record(self) -> dict:
        return {"resource_type": int(self.resource_type), "resource_name": self.resource_name,
                "pattern_type": int(self.pattern_type), "principal": self.principal, "host": self.host,
                "operation": int(self.operation), "permission": int(self.permission)}

    @classmethod
    def from_record(cls, record: dict) -> AclBinding:
        return cls(ResourceType(record["resource_type"]), record["resource_name"], PatternType(record["pattern_type"]),
                   record["principal"], record["host"], Operation(record["operation"]),
                   Permission(record["permission"]))

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL applies to one concrete resource (the authorizer's question)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)


@dataclasses.dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None or ANY matches every value of a field."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def unknown_part(self) -> str | None:
        """Which half of the filter holds an UNKNOWN value (Kafka refuses those): patternFilter, entryFilter or None."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "patternFilter"
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "entryFilter"
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self._pattern_matches(acl) and self._entry_matches(acl)

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type in (PatternType.ANY, PatternType.MATCH) and self.resource_name is None:
            return True
        if self.pattern_type == PatternType.MATCH:  # every stored pattern that would match this name
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD)
            return self.resource_name.startswith(acl.resource_name)  # type: ignore[union-attr]
        if self.pattern_type != PatternType.ANY and self.pattern_type != acl.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name

    def _entry_matches(self, acl: AclBinding) -> bool:
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == Operation.ANY or self.operation == acl.operation)
                and (self.permission == Permission.ANY or self.permission == acl.permission))


class InvalidAclError(ValueError):
    """A binding CreateAcls refuses with INVALID_REQUEST; the message is Kafka's."""


def validate(acl: AclBinding) -> None:
    """Refuse what Kafka's controller refuses (AclControlManager.validateNewAcl and AclApis)."""
    if acl.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise InvalidAclError(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAclError(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (Operation.ANY, Operation.UNKNOWN):
        raise InvalidAclError(f"Invalid operation {acl.operation.name}")
    if acl.permission not in (Permission.ALLOW, Permission.DENY):
        raise InvalidAclError(f"Invalid permissionType {acl.permission.name}")
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise InvalidAclError("The only valid name for the CLUSTER resource is kafka-cluster")
    if not acl.resource_name:
        raise InvalidAclError("Invalid empty resource name")
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAclError(f"Could not parse principal from `{acl.principal}` (no colon is found).")


class AclTable:
    """Every ACL of the cluster, in memory and in the store's `acls` table of the default stream.

    The memory copy is rebuilt whenever the store's table changed (its state_version moved): ACLs
    another broker of the cluster, or worker 0 of `serve --workers N`, created or deleted count here
    as soon as this process's store has read them, not after a restart (a DENY added through one
    broker left writes through the others allowed)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._version = -1
        self._acls: dict[str, AclBinding] = {}
        self._by_type: dict[ResourceType, dict[str, AclBinding]] = {}
        self._current()

    def _current(self) -> None:
        """Rebuild the memory copy if the store's table changed since it was made."""
        version = self.store.state_version(self.store.default_stream, ACL_TABLE)
        if version == self._version:
            return
        self._version = version
        self._acls = {key: AclBinding.from_record(record)
                      for key, record in self.store.get_state(self.store.default_stream, ACL_TABLE).items()}
        self._by_type = {}
        for key, acl in self._acls.items():
            self._by_type.setdefault(acl.resource_type, {})[key] = acl

    def __iter__(self) -> Iterator[AclBinding]:
        self._current()
        return iter(list(self._acls.values()))

    def for_resource(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """The ACLs that apply to one resource; asked on every request, so only its type's ACLs are scanned."""
        self._current()
        of_type = self._by_type.get(resource_type, {})
        return [acl for acl in of_type.values() if acl.matches_resource(resource_type, name)]

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        self._current()
        return [acl for acl in self._acls.values() if acl_filter.matches(acl)]

    async def add(self, acls: list[AclBinding]) -> None:
        """Store bindings durably; they count from then on (an existing binding is kept once)."""
        await self.store.put_state(self.store.default_stream, ACL_TABLE, {acl.key: acl.record() for acl in acls})
        self._current()

    async def remove(self, acls: list[AclBinding]) -> None:
        await self.store.put_state(self.store.default_stream, ACL_TABLE, {acl.key: None for acl in acls})
        self._current()
