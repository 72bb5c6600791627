"""The one authorizer every handler asks: Kafka ACLs and stream permission expressions as one model.

A request is allowed when authorization is off (the default: a broker
without security behaves as it always did), when its principal is a super
user, or when nothing denies it and something grants it:

1. a Kafka DENY ACL matching the principal, host, operation and resource
   refuses, whatever else says;
2. a Kafka ALLOW ACL for the operation (or ALL, or one implying it: READ,
   WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS) grants;
3. for a topic, the expression of its stream's permission for the operation
   grants when it is true for the principal (STREAM_GRANTS below);
4. with no ACL on the resource and no expression set for the operation,
   `allow_everyone_if_no_acl_found` decides (false, as in Kafka).

Every refusal is one line on the `kafkacompat.audit` logger.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from kafkacompat.protocol.versions import api_name
from kafkacompat.storage import PermissionEntries, Store, TopicInfo

from ..topic_names import TopicNameError, canonical_name, split_name
from . import permissions
from .acls import CLUSTER_NAME, IMPLIED_BY, WILDCARD_PRINCIPAL, AclTable, Operation, Permission, ResourceType
from .principal import ANONYMOUS, WORKER

audit = logging.getLogger("kafkacompat.audit")


class _TopicLookup(Protocol):
    def topic_for(self, name: str) -> tuple[TopicInfo | None, ErrorCode]: ...


class TopicAsker(Protocol):
    """A request whose view of the broker looks topics up: what `Authorizer.topic_for` reads of it."""

    @property
    def cluster(self) -> _TopicLookup: ...

    @property
    def peer(self) -> str: ...


class _Authorizing(Protocol):
    @property
    def authorizer(self) -> Authorizer: ...


class ConfigAsker(Protocol):
    """A request whose view of the broker holds the authorizer: what `config_refusal` reads of it."""

    @property
    def cluster(self) -> _Authorizing: ...

    @property
    def peer(self) -> str: ...


class AuthorizerSettings(Protocol):
    """The broker settings authorization follows (kafkacompat.config.BrokerConfig has them; security sits
    below the configuration, which checks its settings with security's parsers)."""

    authorizer: bool
    super_users: list[str]
    allow_everyone_if_no_acl_found: bool
    user_groups_file: str | None

# Which stream permission grants which operation on the stream's topics (docs/security.md, "Stream permissions
# and ACLs").
STREAM_GRANTS: dict[Operation, tuple[str, ...]] = {
    Operation.READ: ("consume", "copy"),
    Operation.WRITE: ("produce",),
    Operation.DESCRIBE: ("produce", "consume", "topic", "admin", "copy"),
    Operation.CREATE: ("topic",),
    Operation.DELETE: ("topic",),
    Operation.ALTER: ("topic",),
    Operation.ALTER_CONFIGS: ("topic",),
    Operation.DESCRIBE_CONFIGS: ("topic", "admin"),
}
STREAM_PERMISSIONS = ("produce", "consume", "topic", "admin", "copy")



def client_host(peer: str) -> str:
    """The client's address without its port, as ACL hosts name it ("127.0.0.1:53312" -> "127.0.0.1")."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return host.strip("[]")


class Authorizer:
    def __init__(self, config: AuthorizerSettings, store: Store) -> None:
        self.enabled = config.authorizer or bool(config.super_users)
        self.super_users = frozenset((*config.super_users, WORKER))  # a worker asking another: the broker itself
        self.allow_if_no_acl = config.allow_everyone_if_no_acl_found
        self.groups = permissions.UserGroups(config.user_groups_file)
        self.acls = AclTable(store)
        self.store = store

    # the decision -----------------------------------------------------------------------

    def _identities(self, principal: str) -> set[str]:
        """The ACL principals that name this principal: itself, User:*, and Group:<g> for its groups."""
        names = {principal, WILDCARD_PRINCIPAL}
        if principal.startswith("User:"):
            names.update(f"Group:{group}" for group in self.groups.of(principal[5:]))
        return names

    def subject(self, principal: str) -> permissions.Subject:
        """Who a principal is for stream expressions: its user name and groups."""
        user = principal.partition(":")[2] if principal.startswith("User:") else principal
        return permissions.Subject(user, self.groups.of(user))

    def allowed(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str,
                stream: str | None = None) -> bool:
        """The decision alone (no audit line): see the module docstring for the rules."""
        if not self.enabled or principal in self.super_users:
            return True
        who = self._identities(principal)
        acls = [acl for acl in self.acls.for_resource(resource_type, name)
                if acl.principal in who and acl.host in ("*", host)]
        if any(acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL) for acl in acls):
            return False
        implying = IMPLIED_BY.get(operation, frozenset())
        if any(acl.permission == Permission.ALLOW
               and (acl.operation in (operation, Operation.ALL) or acl.operation in implying) for acl in acls):
            return True
        expressions = self._expressions(stream, operation)
        if expressions:
            subject = self.subject(principal)
            if any(permissions.allows(text, subject) for text in expressions):
                return True
        return self.allow_if_no_acl and not expressions and not self.acls.for_resource(resource_type, name)

    def _expressions(self, stream: str | None, operation: Operation) -> list[str]:
        """The stream's non-empty expressions that could grant this operation on its topics."""
        if stream is None:
            return []
        info = self.store.get_stream(stream)
        if info is None:
            return []
        entries: PermissionEntries = info.policy.permissions
        return [text for text in (getattr(entries, p) for p in STREAM_GRANTS.get(operation, ())) if text]

    def stream_allows(self, principal: str, stream: str, permission: str) -> bool:
        """Whether one stream permission (MapR's admin, copy, ...) grants this principal, for the stream admin API."""
        if not self.enabled or principal in self.super_users:
            return True
        info = self.store.get_stream(stream)
        text = getattr(info.policy.permissions, permission) if info is not None else ""
        return permissions.allows(text, self.subject(principal))

    def any_allowed(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether some resource of a type is granted (Kafka's authorizeByResourceType, for InitProducerId)."""
        if not self.enabled or principal in self.super_users:
            return True
        who = self._identities(principal)
        mine = [acl for acl in self.acls if acl.resource_type == resource_type and acl.principal in who
                and acl.host in ("*", host) and acl.operation in (operation, Operation.ALL)]
        if any(acl.permission == Permission.DENY and acl.resource_name == "*" for acl in mine):
            return False
        if any(acl.permission == Permission.ALLOW for acl in mine):
            return True
        if resource_type == ResourceType.TOPIC:
            subject = self.subject(principal)
            for info in self.store.list_streams():
                for p in STREAM_GRANTS.get(operation, ()):
                    if permissions.allows(getattr(info.policy.permissions, p), subject):
                        return True
        return self.allow_if_no_acl and not any(acl.resource_type == resource_type for acl in self.acls)

    # what handlers call ----------------------------------------------------------------

    def authorize(self, ctx: Any, operation: Operation, resource_type: ResourceType, name: str = CLUSTER_NAME,
                  *, stream: str | None = None, log_denied: bool = True) -> bool:
        """Decide for one request and log a refusal on the audit logger."""
        if not self.enabled:
            return True
        principal = getattr(ctx, "principal", ANONYMOUS)
        if self.allowed(principal, client_host(ctx.peer), operation, resource_type, name, stream):
            return True
        if log_denied:
            deny(ctx, operation, resource_type, name)
        return False

    def topic(self, ctx: Any, operation: Operation, name: str, *, log_denied: bool = True) -> bool:
        """Decide for a topic as a client names it (canonical, alias or plain name)."""
        if not self.enabled:
            return True
        stream, canonical = self.topic_resource(name)
        return self.authorize(ctx, operation, ResourceType.TOPIC, canonical, stream=stream, log_denied=log_denied)

    def topic_for(self, ctx: TopicAsker, operation: Operation, name: str) -> tuple[TopicInfo | None, ErrorCode]:
        """Cluster.topic_for behind the access check: (None, TOPIC_AUTHORIZATION_FAILED) when refused.

        Kafka checks access before existence, so a refused client cannot
        tell whether the topic exists.
        """
        if self.enabled and not self.topic(ctx, operation, name):
            return None, ErrorCode.topic_authorization_failed
        return ctx.cluster.topic_for(name)

    def known_topic(self, ctx: Any, operation: Operation, stream: str, topic: str, *, log_denied: bool = True) -> bool:
        """Decide for a topic already resolved to its stream (e.g. found by topic id)."""
        if not self.enabled:
            return True
        name = canonical_name(stream, topic, self.store.default_stream)
        return self.authorize(ctx, operation, ResourceType.TOPIC, name, stream=stream, log_denied=log_denied)

    def topic_resource(self, name: str) -> tuple[str | None, str]:
        """(stream, name ACLs match) of a topic name: the canonical name; a name that is not one stays as given."""
        default = self.store.default_stream
        try:
            stream, topic = split_name(name, default)
        except TopicNameError:
            return None, name
        return stream, canonical_name(stream, topic, default)

    def topics(self, ctx: Any, operation: Operation, names: Iterable[str], *, log_denied: bool = True) -> set[str]:
        """The names among `names` this request may use for the operation."""
        return {name for name in names if self.topic(ctx, operation, name, log_denied=log_denied)}

    def cluster(self, ctx: Any, operation: Operation, *, log_denied: bool = True) -> bool:
        return self.authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)

    def group(self, ctx: Any, operation: Operation, group_id: str, *, log_denied: bool = True) -> bool:
        return self.authorize(ctx, operation, ResourceType.GROUP, group_id, log_denied=log_denied)

    def operations(self, ctx: Any, resource_type: ResourceType, name: str, candidates: int,
                   stream: str | None = None) -> int:
        """Kafka's authorized-operations bit set: those of `candidates` (bits by operation code) allowed."""
        if not self.enabled:
            return candidates
        principal, host = getattr(ctx, "principal", ANONYMOUS), client_host(ctx.peer)
        return sum(1 << op for op in Operation if candidates & (1 << op)
                   and self.allowed(principal, host, op, resource_type, name, stream))

    def transactional_id(self, ctx: Any, operation: Operation, txn_id: str) -> bool:
        return self.authorize(ctx, operation, ResourceType.TRANSACTIONAL_ID, txn_id)


def deny(ctx: Any, operation: Operation | str, resource_type: ResourceType | str, name: str) -> None:
    """The audit line of one refusal: who, from where, what, on which resource, through which entry point.

    The entry point is the context's `entry` (the HTTP server names its route, "console GET /console/topic"),
    else the Kafka listener the request came in on; never a secret.
    """
    api = getattr(getattr(ctx, "header", None), "api_key", None)
    audit.info(
        "authorization denied: principal=%s client=%s operation=%s resource=%s:%s api=%s entry=%s",
        getattr(ctx, "principal", ANONYMOUS), ctx.peer,
        getattr(operation, "name", operation), getattr(resource_type, "name", resource_type), name,
        api_name(api) if api is not None else "-",
        getattr(ctx, "entry", None) or f"kafka listener {getattr(ctx, 'listener', '-')}",
    )



# Kafka's messages for its authorization errors (Errors.java), which clients print as they are.
TOPIC_DENIED = "Topic authorization failed."
GROUP_DENIED = "Group authorization failed."
CLUSTER_DENIED = "Cluster authorization failed."
TRANSACTIONAL_ID_DENIED = "Transactional Id authorization failed."


def config_refusal(ctx: ConfigAsker, operation: Operation, resource_type: int,
                   name: str, *, log_denied: bool = True) -> tuple[ErrorCode, str] | None:
    """DescribeConfigs / AlterConfigs: the error for a config resource the principal may not read or change.

    Topics need the operation on the topic, groups on the group, brokers and
    broker loggers on the cluster (KafkaApis' configsAuthorizationApiError).
    `log_denied` False: no audit line for a refusal (a look ahead; the answer's own check writes it).
    """
    authorizer: Authorizer = ctx.cluster.authorizer
    if not authorizer.enabled:
        return None
    if resource_type == 2:  # TOPIC
        if not authorizer.topic(ctx, operation, name, log_denied=log_denied):
            return ErrorCode.topic_authorization_failed, TOPIC_DENIED
    elif resource_type == 32:  # GROUP
        if not authorizer.group(ctx, operation, name, log_denied=log_denied):
            return ErrorCode.group_authorization_failed, GROUP_DENIED
    elif resource_type in (4, 8):  # BROKER, BROKER_LOGGER
        if not authorizer.cluster(ctx, operation, log_denied=log_denied):
            return ErrorCode.cluster_authorization_failed, CLUSTER_DENIED
    return None
