"""`kafkacompat stream|topic|cursor ...`: manage a running broker's namespace.

Flags read like maprcli and kafka-topics.sh. Each command is one request to
the broker's private admin API (admin/client.py), except `topic list` without a
stream, which asks every stream in turn. Bad input ends in one
line on stderr and a non-zero exit (2 for input the CLI rejects itself, 1
for requests the broker refuses), with nothing changed.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kafkacompat.storage.namespace import MIN_PARTITIONLET_BYTES

from ..admin import progress
from ..admin.client import AdminClient, AdminError, BrokerUnreachable
from ..admin.output import all_topics_table, count_of, fail, render
from ..security.permissions import ExpressionError
from ..security.permissions import check as check_expression
from ..units import format_bytes, parse_duration, parse_size
from . import replication as replication_cli
from .arg_types import count, name_value, parsed, partition_number
from .options import OneLineParser, add_bootstrap, add_progress

TOPIC_NAME_HELP = (
    "the topic as /stream/path:topic, as its Kafka-legal alias stream.path..topic, "
    "or as a plain name (a topic of the default stream)"
)
# MapR's permission entries: who may do what, as access expressions such as 'u:alice | g:ops'.
PERMISSIONS = {
    "produce": "who may publish to the stream's topics",
    "consume": "who may read the stream's topics",
    "topic": "who may create and delete the stream's topics",
    "admin": "who may change and delete the stream",
    "copy": "who may copy or replicate the stream",
}


# value types: argparse reports their ValueError messages -------------------------


def _ttl(text: str) -> int:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; 0 keeps messages forever") from None


def _size(text: str) -> int:
    return parsed(parse_size, text)


def _partitionlet_size(text: str) -> int:
    size = _size(text)
    if size < MIN_PARTITIONLET_BYTES:
        raise argparse.ArgumentTypeError(f"must be at least {format_bytes(MIN_PARTITIONLET_BYTES)}, not {text}")
    return size


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise argparse.ArgumentTypeError(f"{text!r} is neither true nor false")


def _expression(text: str) -> str:
    return parsed(check_expression, text, ExpressionError)


# requests built from parsed arguments ------------------------------------------------


def _policy(args: argparse.Namespace) -> dict[str, Any]:
    policy: dict[str, Any] = {}
    for flag, field in (("ttl", "ttl_seconds"), ("partitions", "default_partitions"), ("autocreate", "autocreate"),
                        ("fsync", "fsync"), ("partitionlet_size", "partitionlet_bytes"),
                        ("cleanup_policy", "cleanup_policy")):
        value = getattr(args, flag)
        if value is not None:
            policy[field] = value
    perms = {p: getattr(args, f"{p}_perm") for p in PERMISSIONS if getattr(args, f"{p}_perm") is not None}
    if perms:
        policy["permissions"] = perms
    return policy


def _stream_edit(args: argparse.Namespace) -> dict[str, Any]:
    policy = _policy(args)
    if not policy:
        args.parser.error("nothing to change: give at least one of --ttl, --partitions, --autocreate, --fsync, "
                          "--partitionlet-size, --cleanup-policy or a --*-perm flag")
    return {"path": args.path, "policy": policy}


def _topic_configs(args: argparse.Namespace) -> dict[str, str | None] | None:
    configs: dict[str, str | None] = dict(args.config or [])
    for name in getattr(args, "delete_config", None) or []:
        configs[name] = None
    return configs or None


def _topic_edit(args: argparse.Namespace) -> dict[str, Any]:
    configs = _topic_configs(args)
    if args.partitions is None and configs is None:
        args.parser.error("nothing to change: give --partitions, --config or --delete-config")
    return {"name": args.name, "partitions": args.partitions, "configs": configs}


def _cursor_args(args: argparse.Namespace) -> dict[str, Any]:
    return {"path": args.path, "group": args.group, "topic": args.topic,
            "partition": getattr(args, "partition", None)}


# parsers ---------------------------------------------------------------------------


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_bootstrap(common)
    common.add_argument("--json", action="store_true", help="print the broker's answer as JSON, for scripts")
    return common


def _policy_flags(p: argparse.ArgumentParser, defaults: bool) -> None:
    d = (lambda text: f" (default {text})") if defaults else (lambda text: "")
    p.add_argument("--ttl", metavar="DURATION", type=_ttl,
                   help="time-to-live of messages: seconds, or with a unit as in 7d, 12h, 30m; "
                        "0 keeps them forever" + d("7d, as on MapR and Kafka"))
    p.add_argument("--partitions", metavar="N", type=count,
                   help="default number of partitions of new topics" + d("1"))
    p.add_argument("--autocreate", metavar="true|false", type=_bool,
                   help="create topics on first use by a producer or consumer" + d("true"))
    p.add_argument("--fsync", choices=("none", "interval", "always"),
                   help="when writes reach the disk: left to the OS, grouped every few ms, "
                        "or before acks=all answers" + d("interval"))
    p.add_argument("--partitionlet-size", metavar="SIZE", type=_partitionlet_size,
                   help="size at which a partition starts a new partitionlet, as in 64MB or 1GiB "
                        "(binary units)" + d("1GiB"))
    p.add_argument("--cleanup-policy", choices=("delete", "compact", "compact,delete"),
                   help="Kafka's cleanup.policy for the stream's topics: delete old partitionlets by ttl, "
                        "compact to the last record per key, or both" + d("delete"))
    for perm, who in PERMISSIONS.items():
        p.add_argument(f"--{perm}-perm", f"--{perm}perm", dest=f"{perm}_perm", metavar="EXPR", type=_expression,
                       help=f"{who}: an access expression such as 'u:alice | g:ops & !u:bob' or p (public), "
                            "enforced when the broker's authorizer is on")


def _command(sub: argparse._SubParsersAction, name: str, op: str, help_text: str, common: argparse.ArgumentParser,
             build: Any, example: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, parents=[common], help=help_text, description=help_text[0].upper() + help_text[1:] + ".",
                       epilog=f"example:\n  {example}\n", formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=_run, op=op, build=build, parser=p)
    return p


def _stream_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    group = sub.add_parser(
        "stream", help="create, edit, inspect, purge and delete streams",
        description="Streams group topics under one path and share policies (time-to-live, default partitions, "
                    "autocreate, fsync, permissions), as in `maprcli stream`.",
    )
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=OneLineParser)
    p = _command(actions, "create", "stream.create", "create a stream at a path", common,
                 lambda a: {"path": a.path, "policy": _policy(a)},
                 "kafkacompat stream create /apps/iot/oilpump_metrics --ttl 7d --partitions 3 --autocreate true")
    p.add_argument("path", metavar="PATH", help="absolute path; components use letters, digits, '_' and '-'")
    _policy_flags(p, defaults=True)
    p = _command(actions, "edit", "stream.edit", "change a stream's policies (only the flags given)", common,
                 _stream_edit, "kafkacompat stream edit /apps/iot/oilpump_metrics --ttl 12h")
    p.add_argument("path", metavar="PATH")
    _policy_flags(p, defaults=False)
    p = _command(actions, "info", "stream.info", "show a stream's policies", common,
                 lambda a: {"path": a.path}, "kafkacompat stream info /apps/iot/oilpump_metrics")
    p.add_argument("path", metavar="PATH")
    p = _command(actions, "list", "stream.list", "list streams, all or those under a path", common,
                 lambda a: {"prefix": a.prefix}, "kafkacompat stream list /apps")
    p.add_argument("prefix", metavar="PATH", nargs="?", help="only streams at or under this path")
    p = _command(actions, "delete", "stream.delete", "delete a stream with all its topics and cursors", common,
                 lambda a: {"path": a.path}, "kafkacompat stream delete /apps/iot/oilpump_metrics")
    p.add_argument("path", metavar="PATH")
    add_progress(p)
    replication_cli.add_stream_parsers(actions, common)
    p = _command(actions, "purge", "stream.purge",
                 "delete every message and cursor of a stream, keeping its topics (offsets go on, never reused)",
                 common, lambda a: {"path": a.path}, "kafkacompat stream purge /apps/iot/oilpump_metrics")
    p.add_argument("path", metavar="PATH")
    add_progress(p)


def _topic_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    group = sub.add_parser(
        "topic", help="create, edit, inspect and delete topics of a stream",
        description="Topics live in streams; name one as /stream/path:topic, as stream.path..topic, "
                    "or by a plain Kafka name in the default stream, as in `kafka-topics.sh`.",
    )
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=OneLineParser)
    p = _command(actions, "create", "topic.create", "create a topic in an existing stream", common,
                 lambda a: {"name": a.name, "partitions": a.partitions, "configs": _topic_configs(a)},
                 "kafkacompat topic create /apps/iot/oilpump_metrics:Pressure --partitions 3")
    p.add_argument("name", metavar="PATH:TOPIC", help=TOPIC_NAME_HELP)
    p.add_argument("--partitions", metavar="N", type=count, help="number of partitions (default: the stream's)")
    p.add_argument("--config", metavar="NAME=VALUE", type=name_value, action="append",
                   help="a Kafka topic config overriding the stream's policy, as in retention.ms=3600000 "
                        "(repeatable)")
    p = _command(actions, "edit", "topic.edit", "add partitions to a topic or change its configs", common,
                 _topic_edit, "kafkacompat topic edit /apps/iot/oilpump_metrics:Pressure --partitions 6")
    p.add_argument("name", metavar="PATH:TOPIC", help=TOPIC_NAME_HELP)
    p.add_argument("--partitions", metavar="N", type=count, help="new number of partitions; topics only grow")
    p.add_argument("--config", metavar="NAME=VALUE", type=name_value, action="append",
                   help="set a Kafka topic config (repeatable)")
    p.add_argument("--delete-config", metavar="NAME", action="append",
                   help="remove a topic config, falling back to the stream's policy (repeatable)")
    p = _command(actions, "info", "topic.info",
                 "show a topic's partitions: offsets, partitionlets, the volume each sits on, sizes", common,
                 lambda a: {"name": a.name}, "kafkacompat topic info /apps/iot/oilpump_metrics:Pressure")
    p.add_argument("name", metavar="PATH:TOPIC", help=TOPIC_NAME_HELP)
    p = _command(actions, "list", "topic.list", "list the topics of a stream, or of every stream", common,
                 lambda a: {"path": a.path}, "kafkacompat topic list /apps/iot/oilpump_metrics")
    p.add_argument("path", metavar="PATH", nargs="?", help="the stream (default: every stream)")
    p = _command(actions, "delete", "topic.delete", "delete a topic with its messages and cursors", common,
                 lambda a: {"name": a.name}, "kafkacompat topic delete /apps/iot/oilpump_metrics:Warnings")
    p.add_argument("name", metavar="PATH:TOPIC", help=TOPIC_NAME_HELP)


def _cursor_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    group = sub.add_parser(
        "cursor", help="list and delete consumer groups' committed offsets (cursors) in a stream",
        description="Cursors are the offsets consumer groups committed; they live in the stream, "
                    "as in `maprcli stream cursor`.",
    )
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=OneLineParser)
    p = _command(actions, "list", "cursor.list", "list committed offsets with their lag", common, _cursor_args,
                 "kafkacompat cursor list /apps/iot/oilpump_metrics --group dashboards")
    p.add_argument("path", metavar="PATH", help="the stream")
    p.add_argument("--group", metavar="G", help="only this consumer group")
    p.add_argument("--topic", metavar="T", help="only this topic of the stream")
    p = _command(actions, "delete", "cursor.delete",
                 "delete a group's cursors: all, or those of one topic or partition", common, _cursor_args,
                 "kafkacompat cursor delete /apps/iot/oilpump_metrics --group dashboards --topic Pressure")
    p.add_argument("path", metavar="PATH", help="the stream")
    p.add_argument("--group", metavar="G", required=True, help="the consumer group")
    p.add_argument("--topic", metavar="T", help="only this topic of the stream")
    p.add_argument("--partition", metavar="P", type=partition_number, help="only this partition (needs --topic)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add the stream, topic and cursor commands to the `kafkacompat` parser."""
    common = _common()
    _stream_parsers(sub, common)
    _topic_parsers(sub, common)
    _cursor_parsers(sub, common)
    replication_cli.add_cluster_parser(sub, common)


def _run(args: argparse.Namespace) -> int:
    request = args.build(args)
    client = AdminClient(args.bootstrap_server, security=args.command_config)
    try:
        if args.op == "topic.list" and args.path is None:
            result = _every_topic(client)
        elif args.op in ("stream.purge", "stream.delete"):
            result = _long_stream_call(client, args, request)
        else:
            result = client.call(args.op, **request)
    except (AdminError, BrokerUnreachable) as exc:
        return fail(str(exc), args.json)
    if args.json:
        print(json.dumps(result, indent=2))
    elif args.op == "topic.list" and args.path is None:
        print(all_topics_table(result))
    else:
        print(render(args.op, result))
    return 0


def _every_topic(client: AdminClient) -> list[dict[str, Any]]:
    """The topics of every stream, like `kafka-topics.sh --list`; a stream deleted meanwhile is skipped."""
    topics = []
    for stream in client.call("stream.list"):
        try:
            topics += client.call("topic.list", path=stream["path"])
        except AdminError as exc:
            if "does not exist" not in str(exc):
                raise
    return topics


def _long_stream_call(client: AdminClient, args: argparse.Namespace, request: dict[str, Any]) -> Any:
    """Purge or delete a stream: one request, with its elapsed time on stderr while it runs."""
    show = progress.wanted(args.progress)
    if not show:
        return client.call(args.op, **request)
    info = client.call("stream.info", path=args.path)
    verb = "purging" if args.op == "stream.purge" else "deleting"
    with progress.waiting(f"{verb} stream {args.path} ({count_of(info['topics'], 'topic')})", True):
        return client.call(args.op, **request)
