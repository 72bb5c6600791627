"""MapR access expressions and Kafka ACL filters, as the authorizer and the CLI read them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkacompat.config import ConfigError, load_config
from kafkacompat.security import permissions
from kafkacompat.security.acls import (
    AclBinding,
    AclFilter,
    InvalidAclError,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    validate,
)
from kafkacompat.security.permissions import ExpressionError, Subject, allows, parse, read_user_groups

ALICE = Subject("alice", frozenset({"iot"}))
BOB = Subject("bob", frozenset({"ops"}))
CARL = Subject("carl", frozenset({"ops", "iot"}))
NOBODY = Subject("ANONYMOUS")


@pytest.mark.parametrize(("expression", "granted"), [
    ("u:alice", {"alice"}),
    ("g:ops", {"bob", "carl"}),
    ("p", {"alice", "bob", "carl", "ANONYMOUS"}),
    ("u:alice | g:ops", {"alice", "bob", "carl"}),
    ("g:ops & !u:bob", {"carl"}),
    ("u:alice | g:ops & !u:bob", {"alice", "carl"}),  # & binds tighter than |
    ("(u:alice | g:ops) & !u:bob", {"alice", "carl"}),
    ("(u:alice | g:ops) & g:iot", {"alice", "carl"}),
    ("!(g:ops | g:iot)", {"ANONYMOUS"}),
    ("!!u:alice", {"alice"}),
    ("  u:alice|u:bob  ", {"alice", "bob"}),
    ("", set()),  # an empty expression grants nothing by itself
])
def test_expressions_grant_whom_mapr_would(expression: str, granted: set[str]) -> None:
    assert {s.user for s in (ALICE, BOB, CARL, NOBODY) if allows(expression, s)} == granted


@pytest.mark.parametrize(("expression", "says"), [
    ("u:", "'u:' needs a user name"),
    ("g:", "'g:' needs a group name"),
    ("u:alice |", "expected u:USER, g:GROUP, p or '(' at the end"),
    ("(u:alice", "missing ')' at the end"),
    ("u:alice)", "unexpected ')' at column 8"),
    ("x:alice", "unexpected 'x' at column 1"),
    ("u:alice g:ops", "unexpected 'g:ops' at column 9"),
    ("& u:alice", "before '&' at column 1"),
    ("u:al*ce", "'u:al*ce' needs a user name of letters, digits"),
    ("!", "at the end"),
])
def test_malformed_expressions_say_where(expression: str, says: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse(expression)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_malformed_stored_expression_grants_nothing() -> None:
    assert not allows("u:alice |", ALICE)


def test_user_groups_file(tmp_path: Path) -> None:
    groups = tmp_path / "groups"
    groups.write_text("# who is in which group\nalice: iot, ops\nbob:ops   # on call\n\ncarl:\n")
    assert read_user_groups(str(groups)) == {
        "alice": frozenset({"iot", "ops"}), "bob": frozenset({"ops"}), "carl": frozenset()}
    groups.write_text("alice: iot\nbob ops\n")
    with pytest.raises(ValueError, match="line 2: expected 'user: group, group'"):
        read_user_groups(str(groups))


def test_user_groups_are_read_again_when_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "groups"
    path.write_text("alice: iot\n")
    groups = permissions.UserGroups(str(path))
    assert groups.of("alice") == {"iot"}
    path.write_text("alice: iot, ops\n")
    os.utime(path, (1, 1))  # a different mtime, whatever the clock's resolution
    groups._checked = float("-inf")  # skip the once-a-second wait
    assert groups.of("alice") == {"iot", "ops"}


@pytest.mark.parametrize("flag", ["--produceperm", "--produce-perm", "--consumeperm", "--adminperm", "--copyperm"])
def test_cli_rejects_a_bad_expression_in_one_line(flag: str) -> None:
    done = subprocess.run([sys.executable, "-m", "kafkacompat", "stream", "create", "/apps/x", flag, "u:a | (g:b"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "missing ')' at the end of 'u:a | (g:b'" in done.stderr


# --- Kafka's ACL filters --------------------------------------------------------------

def acl(name: str, pattern: PatternType = PatternType.LITERAL, principal: str = "User:alice",
        operation: Operation = Operation.READ, permission: Permission = Permission.ALLOW,
        resource: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


ORDERS = acl("orders")
WILDCARD = acl("*")
PREFIX = acl("ord", PatternType.PREFIXED)
GROUP = acl("ord", resource=ResourceType.GROUP)
ALL = [ORDERS, WILDCARD, PREFIX, GROUP]


@pytest.mark.parametrize(("wanted", "matched"), [
    (AclFilter(), ALL),
    (AclFilter(ResourceType.TOPIC), [ORDERS, WILDCARD, PREFIX]),
    (AclFilter(ResourceType.TOPIC, "orders"), [ORDERS]),  # ANY pattern type: the exact name only
    (AclFilter(ResourceType.TOPIC, "orders", PatternType.MATCH), [ORDERS, WILDCARD, PREFIX]),
    (AclFilter(ResourceType.TOPIC, "ord", PatternType.PREFIXED), [PREFIX]),
    (AclFilter(ResourceType.TOPIC, None, PatternType.LITERAL), [ORDERS, WILDCARD]),
    (AclFilter(ResourceType.ANY, "ord"), [PREFIX, GROUP]),
    (AclFilter(principal="User:bob"), []),
    (AclFilter(operation=Operation.WRITE), []),
    (AclFilter(permission=Permission.DENY), []),
])
def test_filters_match_as_kafkas_acl_binding_filter(wanted: AclFilter, matched: list[AclBinding]) -> None:
    assert [a for a in ALL if wanted.matches(a)] == matched


@pytest.mark.parametrize(("binding", "message"), [
    (acl("x", resource=ResourceType.ANY), "Invalid resourceType ANY"),
    (acl("x", pattern=PatternType.MATCH), "Invalid patternType MATCH"),
    (acl("x", operation=Operation.ANY), "Invalid operation ANY"),
    (acl("x", permission=Permission.ANY), "Invalid permissionType ANY"),
    (acl("other", resource=ResourceType.CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(""), "Invalid empty resource name"),
    (acl("x", principal="alice"), "Could not parse principal from `alice` (no colon is found)."),
])
def test_invalid_bindings_get_kafkas_messages(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAclError) as caught:
        validate(binding)
    assert str(caught.value) == message


def test_super_users_in_kafkas_spelling_and_checked(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text('super.users = ["User:admin", "User:ops"]\n')
    assert load_config(str(config), environ={}).super_users == ["User:admin", "User:ops"]
    with pytest.raises(ConfigError, match="super_users: 'admin' is not a principal such as User:admin"):
        load_config(None, environ={"KAFKACOMPAT_SUPER_USERS": "admin"})
    with pytest.raises(ConfigError, match="user_groups_file: cannot read"):
        load_config(None, environ={"KAFKACOMPAT_USER_GROUPS_FILE": str(tmp_path / "missing")})
