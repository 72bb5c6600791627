"""One INFO line per admin operation, whichever entry point it came through.

Topics, partitions, configs, ACLs, users, groups, offsets, records and
replica links change through Kafka's admin APIs (any stock admin client)
and through the private StreamAdmin API (the `kafkacompat` command line).
An operator reading the log must see every such change, who made it, from
where, and how it ended, whichever way it came. So the connection calls
`logged` for every request after its handler answered, and this module's
table, keyed by API key, says which requests change something and how to
name what they asked for; the outcome is read from the response (a Kafka
error code anywhere in it, or the StreamAdmin JSON reply). Handlers stay
free of logging for this: one table here, nothing to forget in a new one.

Secrets (SCRAM salted passwords, config values named like a password or
key) never reach the log: a SCRAM upsertion is named by user and
mechanism only, and such config values print as "(hidden)".
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

from kafkacompat.protocol.admin_api import STREAM_ADMIN_KEY
from kafkacompat.protocol.versions import api_name

from ..security.acls import Operation, PatternType, Permission, ResourceType

log = logging.getLogger("kafkacompat.admin")

_SECRET_WORDS = ("password", "secret", "jaas", "key")  # a config whose name holds one of these is not printed
_READ_ONLY_STREAM_OPS = ("info", "list")  # StreamAdmin ops (e.g. stream.list, cluster.info) that change nothing
_LABELS = ("name", "topic_name", "topic", "resource_name", "group_id", "user", "partition_index", "partition_id")
_MAX_LISTED = 20  # resources named in one line; a larger request says how many more
_CONFIG_RESOURCES = {2: "topic", 4: "broker", 8: "broker logger", 16: "client metrics", 32: "group"}
_CONFIG_OPS = {0: "SET", 1: "DELETE", 2: "APPEND", 3: "SUBTRACT"}


def request_name(api_key: int) -> str:
    """Kafka's own name of a request: CreateTopics, DeleteAcls, ... (and StreamAdmin)."""
    name = api_name(api_key)
    return "".join(word.capitalize() for word in name.split("_")) if name.islower() else name


def _enum(kind: type, value: Any) -> str:
    try:
        return kind(int(value)).name
    except (ValueError, TypeError):
        return str(value)


def _value(name: str, value: Any) -> str:
    return "(hidden)" if any(word in name.lower() for word in _SECRET_WORDS) else repr(value)


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f" and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


def _configs(configs: Any) -> str:
    return " ".join(f"{c.name}={_value(c.name, c.value)}" for c in configs)


def _create_topics(r: Any) -> str:
    return "create topics " + _listed([f"{t.name} ({t.num_partitions} partitions{', ' if t.configs else ''}"
                                       f"{_configs(t.configs)})" for t in r.topics])


def _delete_topics(r: Any) -> str:
    names = getattr(r, "topic_names", None) or [t.name or str(t.topic_id) for t in getattr(r, "topics", ())]
    return "delete topics " + _listed(list(names))


def _delete_records(r: Any) -> str:
    return "delete records " + _listed([f"{t.name}[{p.partition_index}] before offset {p.offset}"
                                        for t in r.topics for p in t.partitions])


def _resource(c: Any) -> str:
    return f"{_CONFIG_RESOURCES.get(int(c.resource_type), c.resource_type)} {c.resource_name!r}"


def _alter_configs(r: Any) -> str:
    return "alter configs " + _listed([f"{_resource(c)}: {_configs(c.configs) or '(none)'}" for c in r.resources])


def _incremental_alter_configs(r: Any) -> str:
    def change(c: Any) -> str:
        op = _CONFIG_OPS.get(int(c.config_operation), c.config_operation)
        return f"{op} {c.name}" + ("" if c.value is None else f"={_value(c.name, c.value)}")

    return "alter configs " + _listed([f"{_resource(res)}: {' '.join(change(c) for c in res.configs)}"
                                       for res in r.resources])


def _create_partitions(r: Any) -> str:
    return "create partitions " + _listed([f"{t.name} to {t.count}" for t in r.topics])


def _create_acls(r: Any) -> str:
    return "create ACLs " + _listed([
        f"{_enum(Permission, a.permission_type)} {a.principal} {_enum(Operation, a.operation)} from host {a.host} "
        f"on {_enum(ResourceType, a.resource_type)} {a.resource_name!r} "
        f"({_enum(PatternType, getattr(a, 'resource_pattern_type', PatternType.LITERAL))})"
        for a in r.creations])


def _delete_acls(r: Any) -> str:
    return "delete ACLs matching " + _listed([
        f"{_enum(Permission, f.permission_type)} {f.principal_filter or 'any principal'} "
        f"{_enum(Operation, f.operation)} from {f.host_filter or 'any host'} on "
        f"{_enum(ResourceType, f.resource_type_filter)} "
        f"{'any name' if f.resource_name_filter is None else repr(f.resource_name_filter)} "
        f"({_enum(PatternType, getattr(f, 'pattern_type_filter', PatternType.LITERAL))})"
        for f in r.filters])


def _alter_scram(r: Any) -> str:
    def mechanism(c: Any) -> str:
        return {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(int(c.mechanism), str(c.mechanism))

    changes = [f"delete {c.name} {mechanism(c)}" for c in r.deletions]
    changes += [f"set {c.name} {mechanism(c)}" for c in r.upsertions]
    return "alter SCRAM credentials " + _listed(changes)


def _delete_groups(r: Any) -> str:
    return "delete groups " + _listed(list(r.groups_names))


def _offset_delete(r: Any) -> str:
    return f"delete committed offsets of group {r.group_id}: " + _listed(
        [f"{t.name}[{p.partition_index}]" for t in r.topics for p in t.partitions])


def _alter_quotas(r: Any) -> str:
    def entity(e: Any) -> str:
        return ",".join(f"{d.entity_type}={d.entity_name}" for d in e.entity) or "(default)"

    return "alter client quotas " + _listed([f"{entity(e)}: " + " ".join(
        f"{o.key}={'(removed)' if o.remove else o.value}" for o in e.ops) for e in r.entries])


def _offsets_reset(r: Any) -> str:
    return f"reset committed offsets of group {r.group_id}: " + _listed(
        [f"{t.name}[{p.partition_index}] to {p.committed_offset}" for t in r.topics for p in t.partitions])


def _is_offsets_reset(ctx: Any, r: Any) -> bool:
    """An OffsetCommit from outside the group (no member, no generation) to a group consumers have joined:
    what kafka-consumer-groups --reset-offsets and AdminClient.alterConsumerGroupOffsets send. A consumer
    without group management commits the same way, but to a group nobody joined: that is not logged."""
    if r.generation_id_or_member_epoch >= 0 or r.member_id:
        return False
    groups = ctx.cluster.groups
    return r.group_id in groups.consumer.groups or bool(groups.describe(r.group_id).protocol_type)


def _alter_share_offsets(r: Any) -> str:
    return f"reset share group {r.group_id} start offsets " + _listed(
        [f"{t.topic_name}[{p.partition_index}] to {p.start_offset}" for t in r.topics for p in t.partitions])


def _delete_share_offsets(r: Any) -> str:
    return f"delete share group {r.group_id} offsets of " + _listed([t.topic_name for t in r.topics])


def _reassign(r: Any) -> str:
    return "reassign partitions " + _listed([f"{t.name}[{p.partition_index}] to {p.replicas}"
                                             for t in r.topics for p in t.partitions])


def _update_features(r: Any) -> str:
    return "update features " + _listed([f"{f.feature} to {f.max_version_level}" for f in r.feature_updates])


def _elect_leaders(r: Any) -> str:
    topics = r.topic_partitions
    return "elect leaders of " + ("every partition" if topics is None else _listed(
        [f"{t.topic}{list(t.partitions)}" for t in topics]))


def _stream_admin(r: dict[str, Any]) -> str | None:
    op = r.get("op", "")
    if op.rpartition(".")[2] in _READ_ONLY_STREAM_OPS:
        return None
    args = " ".join(f"{k}={v!r}" for k, v in r.items() if k != "op")
    return f"{op} {args}".rstrip()


# API key -> what the request asks for, in words (None: nothing is changed, nothing is logged)
DESCRIBE: dict[int, Callable[[Any], str | None]] = {
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    30: _create_acls,
    31: _delete_acls,
    33: _alter_configs,
    37: _create_partitions,
    42: _delete_groups,
    43: _elect_leaders,
    44: _incremental_alter_configs,
    45: _reassign,
    47: _offset_delete,
    49: _alter_quotas,
    51: _alter_scram,
    57: _update_features,
    91: _alter_share_offsets,
    92: _delete_share_offsets,
    STREAM_ADMIN_KEY: _stream_admin,  # streams, topics, cursors and replica links from the command line
    8: _offsets_reset,  # OffsetCommit, only when _ONLY_WHEN says it is an admin's
}
# API key -> whether this request of an API that is mostly not admin is one (seen after it was handled)
_ONLY_WHEN: dict[int, Callable[[Any, Any], bool]] = {8: _is_offsets_reset}


def _failures(body: Any, where: str = "") -> Iterator[str]:
    """'where: ERROR_NAME (message)' for every non-zero error code in a kio response."""
    code = getattr(body, "error_code", None)
    label = next((str(getattr(body, n)) for n in _LABELS if getattr(body, n, None) is not None), "")
    here = f"{where}[{label}]" if where and label.isdigit() else (label or where)
    if code:
        message = getattr(body, "error_message", None)
        name = getattr(code, "name", str(code)).upper()
        yield f"{here + ': ' if here else ''}{name}" + (f" ({message})" if message else "")
    for field in dataclasses.fields(body):
        value = getattr(body, field.name)
        if isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from _failures(item, here)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from _failures(value, here)


def outcome(answer: Any) -> str:
    """'ok', or what failed, from a handler's answer (a kio response or a StreamAdmin JSON reply)."""
    if isinstance(answer, (bytes, bytearray)):
        try:
            reply = json.loads(answer)
        except ValueError:
            return "answered"
        return "ok" if not reply.get("error_code") else f"failed: {reply.get('error')} (code {reply['error_code']})"
    if not dataclasses.is_dataclass(answer):
        return "answered"
    failed = list(_failures(answer))
    return "ok" if not failed else "failed: " + _listed(failed)


def _line(ctx: Any, what: str, answer: Any) -> None:
    header = ctx.header
    log.info("%s v%d by %s from %s via %s (client %s): %s: %s", request_name(header.api_key), header.api_version,
             ctx.principal, ctx.peer, ctx.listener, header.client_id or "-", what, outcome(answer))


async def _after(ctx: Any, what: str, answer: Any) -> Any:
    body = await answer
    _line(ctx, what, body)
    return body


def stream_admin_change(ctx: Any, request: dict[str, Any], outcome_text: str) -> None:
    """Log a stream, topic, cursor or replica-link change made without a Kafka request (a console form):
    the same words as the command line's StreamAdmin line, with the HTTP route as the entry point."""
    what = _stream_admin(request)
    if what is not None:
        log.info("StreamAdmin by %s from %s at %s: %s: %s", ctx.principal, ctx.peer, ctx.entry, what,
                 outcome_text)


def logged(ctx: Any, request: Any, answer: Any) -> Any:
    """Log an admin request with its outcome (when its answer is ready, for a deferred one); the answer."""
    key = ctx.header.api_key
    describe = DESCRIBE.get(key)
    if describe is None or not log.isEnabledFor(logging.INFO):
        return answer
    try:
        if key in _ONLY_WHEN and not _ONLY_WHEN[key](ctx, request):
            return answer
        what = describe(request)
    except Exception:  # noqa: BLE001 - a request this table does not know how to word is still logged
        log.debug("cannot describe %s", request, exc_info=True)
        what = "(request not described)"
    if what is None or getattr(request, "validate_only", False):
        return answer
    if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
        return _after(ctx, what, answer)
    _line(ctx, what, answer)
    return answer
