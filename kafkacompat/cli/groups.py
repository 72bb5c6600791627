"""`kafkacompat group list|describe|reset-offsets|delete`: consumer groups, as kafka-consumer-groups.sh shows them.

Columns, states and the dry-run default follow Kafka's own tool, so its
users read the same tables; the data comes over Kafka's protocol (Admin
API through confluent-kafka, see admin/kafka_client.py), so the commands work
against any Kafka broker too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import textwrap
from collections.abc import Iterable
from typing import Any

from ..admin import progress
from ..admin.client import BrokerUnreachable
from ..admin.kafka_client import REQUEST_TIMEOUT_S, CommandError, client_config, describe_error
from ..admin.output import count_of, fail, table
from ..operations.offset_reset import NoCommittedOffset, reset_target
from ..security.client import ClientSecurity
from .arg_types import partition_number
from .options import add_bootstrap, add_progress

# confluent-kafka's ConsumerGroupState names -> the names Kafka's tools print
STATES = {
    "UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty",
}
RESET_CHUNK = 1000  # partitions per OffsetCommit when resetting, so progress can be shown


def _admin(bootstrap: str, security: ClientSecurity | None = None) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(bootstrap, security))


def _state(group: Any) -> str:
    """A group (description or listing) state as Kafka's tools name it."""
    return STATES.get(group.state.name, group.state.name)


def _describe(admin: Any, group: str) -> Any:
    description = admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)[group].result()
    if _state(description) == "Dead":
        raise CommandError(f"consumer group '{group}' does not exist")
    return description


def _committed(admin: Any, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets by (topic, partition)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                request_timeout=REQUEST_TIMEOUT_S)
    found = futures[group].result().topic_partitions or []
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


def _list_offsets(admin: Any, partitions: Iterable[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int | None]:
    """ListOffsets for many partitions at once; None where the partition is gone or has no such offset."""
    from confluent_kafka import TopicPartition

    wanted = {TopicPartition(t, p): spec for t, p in partitions}
    if not wanted:
        return {}
    result: dict[tuple[str, int], int | None] = {}
    for tp, future in admin.list_offsets(wanted, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            offset = future.result().offset
        except Exception:  # a deleted topic: shown as '-', as Kafka's tool does
            offset = None
        result[(tp.topic, tp.partition)] = None if offset is None or offset < 0 else offset
    return result


# list / describe ---------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    admin = _admin(args.bootstrap_server, args.command_config)
    listing = admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S).result()
    if listing.errors:
        raise CommandError(f"cannot list every group: {describe_error(listing.errors[0])}")
    groups = sorted((g.group_id, _state(g)) for g in listing.valid)
    if args.json:
        print(json.dumps([{"group": g, "state": s} for g, s in groups], indent=2))
    else:
        print(table(["GROUP", "STATE"], groups) if groups else "No consumer groups.")
    return 0


def group_offsets(admin: Any, group: str) -> dict[str, Any]:
    """A group as kafka-consumer-groups --describe sees it: members, and per partition committed, end and lag."""
    from confluent_kafka.admin import OffsetSpec

    description = _describe(admin, group)
    committed = _committed(admin, group)
    owner: dict[tuple[str, int], Any] = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owner[(tp.topic, tp.partition)] = member
    partitions = sorted(set(owner) | set(committed))
    ends = _list_offsets(admin, partitions, OffsetSpec.latest())
    rows = []
    for topic, partition in partitions:
        member = owner.get((topic, partition))
        offset, end = committed.get((topic, partition)), ends.get((topic, partition))
        rows.append({
            "topic": topic, "partition": partition, "current_offset": offset, "log_end_offset": end,
            "lag": None if offset is None or end is None else max(end - offset, 0),
            "consumer_id": member.member_id if member else None, "host": member.host if member else None,
            "client_id": member.client_id if member else None,
        })
    coordinator = description.coordinator
    return {
        "group": group,
        "state": _state(description),
        "coordinator": {"id": coordinator.id, "host": coordinator.host, "port": coordinator.port},
        "assignment_strategy": description.partition_assignor or None,
        "members": [
            {"consumer_id": m.member_id, "group_instance_id": m.group_instance_id, "host": m.host,
             "client_id": m.client_id,
             "partitions": [{"topic": tp.topic, "partition": tp.partition}
                            for tp in (m.assignment.topic_partitions if m.assignment else [])]}
            for m in description.members
        ],
        "offsets": rows,
    }


def render_describe(view: dict[str, Any], what: str) -> str:
    """The --offsets (default), --members or --state table of kafka-consumer-groups --describe."""
    group = view["group"]
    if what == "state":
        c = view["coordinator"]
        return table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                     [[group, f"{c['host']}:{c['port']} ({c['id']})", view["assignment_strategy"], view["state"],
                       len(view["members"])]])
    if what == "members":
        return table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                     [[group, m["consumer_id"], m["host"], m["client_id"], len(m["partitions"])]
                      for m in view["members"]])
    rows = [[group, r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"], r["consumer_id"],
             r["host"], r["client_id"]] for r in view["offsets"]]
    # members without partitions still show, as in Kafka's tool
    rows += [[group, None, None, None, None, None, m["consumer_id"], m["host"], m["client_id"]]
             for m in view["members"] if not m["partitions"]]
    return table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID"], rows)


def _describe_command(args: argparse.Namespace) -> int:
    view = group_offsets(_admin(args.bootstrap_server, args.command_config), args.group)
    if args.json:
        print(json.dumps(view, indent=2))
        return 0
    what = "members" if args.members else "state" if args.state else "offsets"
    print(render_describe(view, what))
    if not view["members"] and what != "state":
        print(f"Consumer group '{args.group}' has no active members.", file=sys.stderr)
    return 0


# reset-offsets -----------------------------------------------------------------------------


def _topic_scope(text: str) -> tuple[str, list[int] | None]:
    """'topic' or 'topic:0,1,2' (Kafka's --topic syntax); '/stream:topic:0,1' for a stream topic."""
    head, sep, tail = text.rpartition(":")
    is_list = bool(sep and head and tail) and all(n.isdigit() for n in tail.split(","))
    if not is_list or (head.startswith("/") and ":" not in head):  # '/stream:7' is topic 7 of /stream
        return text, None
    return head, [partition_number(n) for n in tail.split(",")]


def _datetime_ms(text: str) -> int:
    """Kafka's --to-datetime: 'YYYY-MM-DDTHH:mm:SS.sss', optionally with a zone (Z, +02:00); local time without."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date-time like 2026-01-31T08:00:00.000 (optionally with Z or +01:00)") from None
    return int(moment.astimezone().timestamp() * 1000)


def _shift(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _scope(admin: Any, args: argparse.Namespace, committed: dict[tuple[str, int], int]) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed)
    from confluent_kafka import KafkaException, TopicCollection

    chosen: list[tuple[str, int]] = []
    for topic, numbers in args.topic:
        # DescribeTopics never creates a topic, where a metadata lookup may auto-create a misspelt one
        future = admin.describe_topics(TopicCollection([topic]), request_timeout=REQUEST_TIMEOUT_S)[topic]
        try:
            count = len(future.result().partitions)
        except KafkaException:
            raise CommandError(f"topic {topic} does not exist") from None
        for number in numbers if numbers is not None else range(count):
            if number >= count:
                raise CommandError(f"topic {topic} has {count_of(count, 'partition')}: there is no partition {number}")
            chosen.append((topic, number))
    return sorted(set(chosen))


def plan_reset(admin: Any, args: argparse.Namespace) -> dict[tuple[str, int], int]:
    """The new offset of every partition in scope, computed as Kafka's tool does (clamped into the log)."""
    from confluent_kafka.admin import OffsetSpec

    state = _state(admin.describe_consumer_groups([args.group], request_timeout=REQUEST_TIMEOUT_S)[args.group]
                   .result())
    if state not in ("Empty", "Dead"):
        raise CommandError(f"assignments can only be reset if the group '{args.group}' is inactive, but the "
                           f"current state is {state}; stop its consumers first")
    committed = _committed(admin, args.group)
    partitions = _scope(admin, args, committed)
    if not partitions:
        raise CommandError(f"consumer group '{args.group}' has no committed offsets: name the partitions with "
                           "--topic")
    earliest = _list_offsets(admin, partitions, OffsetSpec.earliest())
    latest = _list_offsets(admin, partitions, OffsetSpec.latest())
    by_time = _list_offsets(admin, partitions, OffsetSpec.for_timestamp(args.to_datetime)) \
        if args.to_datetime is not None else {}
    return {tp: reset_target(args, f"{tp[0]}-{tp[1]}", committed.get(tp), earliest.get(tp) or 0,
                             latest.get(tp) or 0, by_time.get(tp)) for tp in partitions}


def _reset(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if not args.all_topics and not args.topic:
        args.parser.error("give --topic TOPIC[:PARTITIONS] (repeatable) or --all-topics")
    admin = _admin(args.bootstrap_server, args.command_config)
    plan = plan_reset(admin, args)
    if args.execute:
        items = sorted(plan.items())
        shown = progress.Progress(f"resetting offsets of {args.group}", len(items), progress.wanted(args.progress))
        for start in range(0, len(items), RESET_CHUNK):
            chunk = [TopicPartition(t, p, o) for (t, p), o in items[start:start + RESET_CHUNK]]
            request = ConsumerGroupTopicPartitions(args.group, chunk)
            result = admin.alter_consumer_group_offsets([request], request_timeout=REQUEST_TIMEOUT_S)
            for tp in result[args.group].result().topic_partitions:
                if tp.error is not None:
                    raise CommandError(f"cannot reset {tp.topic}-{tp.partition}: {describe_error(tp.error)}")
            shown.advance(len(chunk))
        shown.finish()
    if args.json:
        print(json.dumps([{"group": args.group, "topic": t, "partition": p, "new_offset": o}
                          for (t, p), o in sorted(plan.items())], indent=2))
    else:
        print(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                    [[args.group, t, p, o] for (t, p), o in sorted(plan.items())]))
    if not args.execute and not args.dry_run:
        print("Dry run: nothing was changed; add --execute to reset these offsets.", file=sys.stderr)
    return 0


# delete ------------------------------------------------------------------------------------


def _delete(args: argparse.Namespace) -> int:
    admin = _admin(args.bootstrap_server, args.command_config)
    failed = []
    for group, future in admin.delete_consumer_groups(args.groups, request_timeout=REQUEST_TIMEOUT_S).items():
        try:
            future.result()
        except Exception as exc:
            code = describe_error(exc)
            if code.startswith("GROUP_ID_NOT_FOUND"):
                failed.append(f"'{group}' does not exist")
            elif code.startswith("NON_EMPTY_GROUP"):
                failed.append(f"'{group}' has active members (stop its consumers first)")
            else:
                failed.append(f"'{group}': {code}")
    if failed:
        raise CommandError("could not delete consumer group " + ", ".join(failed))
    quoted = ", ".join(f"'{g}'" for g in args.groups)
    print(f"Deletion of requested consumer groups ({quoted}) was successful.")
    return 0


# parsers -----------------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    try:
        return args.action_func(args)
    except (CommandError, NoCommittedOffset, BrokerUnreachable, KafkaException) as exc:
        text = describe_error(exc) if isinstance(exc, KafkaException) else str(exc)
        return fail(text, getattr(args, "json", False))


def _action(actions: argparse._SubParsersAction, name: str, func: Any, help_text: str,
            example: str) -> argparse.ArgumentParser:
    p = actions.add_parser(name, help=help_text, description=textwrap.fill(help_text[0].upper() + help_text[1:] + ".", 78),
                           epilog=f"example:\n  {example}\n", formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.set_defaults(func=_run, action_func=func, parser=p)
    return p


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add `group list|describe|reset-offsets|delete` to the `kafkacompat` parser."""
    group = sub.add_parser(
        "group", help="list, describe, reset and delete consumer groups",
        description="Consumer groups over Kafka's protocol, as kafka-consumer-groups.sh and `rpk group` show "
                    "them; their committed offsets are the cursors of `kafkacompat cursor`.",
    )
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _action(actions, "list", _list, "list consumer groups with their state", "kafkacompat group list")
    p.add_argument("--json", action="store_true", help="print JSON, for scripts")
    p = _action(actions, "describe", _describe_command,
                "show a group's partitions with committed offset, log end offset and lag, and its members",
                "kafkacompat group describe dashboards")
    p.add_argument("group", metavar="GROUP")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--members", action="store_true", help="one row per member, with its partition count")
    shape.add_argument("--state", action="store_true", help="the group's coordinator, assignor, state and size")
    shape.add_argument("--json", action="store_true", help="everything as JSON, for scripts")
    p = _action(actions, "reset-offsets", _reset,
                "move an inactive group's committed offsets; a dry run unless --execute, as in Kafka",
                "kafkacompat group reset-offsets dashboards --topic orders --to-earliest --execute")
    p.add_argument("group", metavar="GROUP")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--topic", metavar="TOPIC[:P,P]", type=_topic_scope, action="append",
                       help="a topic, or some of its partitions as orders:0,2 (repeatable)")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    spec = p.add_mutually_exclusive_group(required=True)
    spec.add_argument("--to-earliest", action="store_true", help="to each partition's earliest offset")
    spec.add_argument("--to-latest", action="store_true", help="to each partition's end")
    spec.add_argument("--to-offset", metavar="N", type=_shift, help="to offset N (kept within each partition's log)")
    spec.add_argument("--shift-by", metavar="N", type=_shift, help="by N from the committed offset (N may be < 0)")
    spec.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", type=_datetime_ms,
                      help="to the first message at or after this time (local time unless a zone is given)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--json", action="store_true", help="print the new offsets as JSON, for scripts")
    add_progress(p)
    p = _action(actions, "delete", _delete, "delete consumer groups with their committed offsets",
                "kafkacompat group delete dashboards")
    p.add_argument("groups", metavar="GROUP", nargs="+")
