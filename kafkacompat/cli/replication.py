"""`kafkacompat stream replica|upstream ...` and `kafkacompat cluster info`.

Modelled on `maprcli stream replica` and `maprcli stream upstream`: a
replica is named HOST:PORT/stream/path (the destination broker's Kafka
address and its stream), links are managed on the source cluster
(--bootstrap-server), upstreams on the destination. `autosetup` does what
MapR's does: create the destination stream with the source's policies,
register the upstream, add the replica (which copies the existing data,
then follows), and with --multimaster the same in reverse.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..admin.client import AdminClient, AdminError, BrokerUnreachable, parse_bootstrap
from ..admin.output import fail, table
from ..replication.links import COMPRESSIONS, LinkSpecError, parse_replica
from ..units import format_bytes, format_time_ms
from .arg_types import number_at_least, parsed

# stream policy fields autosetup copies (kafkacompat/broker/stream_views.py POLICY_FIELDS)
POLICY_FIELDS = ("ttl_seconds", "default_partitions", "autocreate", "fsync", "partitionlet_bytes", "cleanup_policy")
REPLICA_HELP = "the destination as HOST:PORT/stream/path: its broker's Kafka address and the stream there"


def _replica(text: str) -> str:
    parsed(parse_replica, text, LinkSpecError)
    return text


def _throttle(text: str) -> float:
    return number_at_least(text, float, 0.0, "is not a number of MB/s",
                           "must be at least 0 (0: unthrottled), not {value:g}")


def _command(actions: argparse._SubParsersAction, name: str, help_text: str, common: argparse.ArgumentParser,
             run: Any, example: str) -> argparse.ArgumentParser:
    p = actions.add_parser(name, parents=[common], help=help_text,
                           description=help_text[0].upper() + help_text[1:] + ".",
                           epilog=f"example:\n  {example}\n", formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=run, parser=p)
    return p


def _link_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--throttle", metavar="MB/s", type=_throttle,
                   help="most megabytes per second the link ships (default: unthrottled)")
    p.add_argument("--compression", choices=COMPRESSIONS,
                   help="compress what the link sends (the stored batches stay as they are; default none)")


def add_stream_parsers(actions: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`stream replica ...` and `stream upstream ...` under `kafkacompat stream`."""
    group = actions.add_parser(
        "replica", help="replicate a stream to streams of other clusters",
        description="Replica links ship a stream's messages at their offsets, its topics and its consumer "
                    "cursors to a stream of another cluster, as `maprcli stream replica`. Run against the "
                    "source cluster (--bootstrap-server; --command-config logs in, on both clusters for autosetup). "
                    "The links themselves do not log in yet: they reach the destination as User:ANONYMOUS.")
    sub = group.add_subparsers(dest="replica_action", metavar="ACTION", required=True)
    p = _command(sub, "add", "add a replica: the destination stream must exist and be empty or a copy", common,
                 _op("replica.add"), "kafkacompat stream replica add --path /apps/iot --replica newyork:9092/apps/iot")
    _path_and_replica(p)
    p.add_argument("--paused", action="store_true", help="add the link paused (start it with `resume`)")
    _link_flags(p)
    p = _command(sub, "autosetup", "create the destination stream with this one's policies, then replicate to it",
                 common, _run_autosetup,
                 "kafkacompat stream replica autosetup --path /apps/iot --replica newyork:9092/apps/iot --multimaster")
    _path_and_replica(p)
    p.add_argument("--multimaster", action="store_true",
                   help="replicate both ways: each side takes writes (for topics of its own)")
    _link_flags(p)
    p = _command(sub, "list", "list a stream's replicas with their state and how far behind they are", common,
                 _op("replica.list"), "kafkacompat stream replica list --path /apps/iot --json")
    p.add_argument("--path", metavar="PATH", required=True, help="the source stream")
    p = _command(sub, "edit", "change a replica's throttle or compression", common, _op("replica.edit"),
                 "kafkacompat stream replica edit --path /apps/iot --replica newyork:9092/apps/iot --throttle 50")
    _path_and_replica(p)
    _link_flags(p)
    for name, text in (("pause", "stop shipping to a replica (what is written meanwhile waits)"),
                       ("resume", "ship to a paused or broken replica again"),
                       ("remove", "stop replicating to a replica (its data stays)")):
        p = _command(sub, name, text, common, _op(f"replica.{name}"),
                     f"kafkacompat stream replica {name} --path /apps/iot --replica newyork:9092/apps/iot")
        _path_and_replica(p)

    group = actions.add_parser(
        "upstream", help="list and register the streams that replicate into a stream",
        description="Upstreams are the source streams replicating into a stream, as `maprcli stream upstream`. "
                    "Run against the destination cluster.")
    sub = group.add_subparsers(dest="upstream_action", metavar="ACTION", required=True)
    for name, text in (("add", "register a source stream replicating into this one"),
                       ("list", "list the upstreams of a stream"),
                       ("remove", "unregister an upstream")):
        p = _command(sub, name, text, common, _op(f"upstream.{name}"),
                     f"kafkacompat stream upstream {name} --path /apps/iot"
                     + ("" if name == "list" else " --upstream sanjose:9092/apps/iot"))
        p.add_argument("--path", metavar="PATH", required=True, help="the destination stream (on this cluster)")
        if name != "list":
            p.add_argument("--upstream", metavar="HOST:PORT/PATH", required=True, type=_replica,
                           help="the source stream as HOST:PORT/stream/path")
        if name == "add":
            p.add_argument("--cluster-uuid", metavar="UUID", dest="cluster_uuid",
                           help="the upstream cluster's UUID (`cluster info` there); by default this cluster "
                                "asks the upstream, which must then be reachable from it")


def add_cluster_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """`kafkacompat cluster info`."""
    group = sub.add_parser("cluster", help="show this cluster's name and UUID",
                           description="A cluster's name and UUID identify it to replica links.")
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    _command(actions, "info", "show the cluster's name, UUID, Kafka cluster id and replica links", common,
             _op("cluster.info"), "kafkacompat cluster info --bootstrap-server sanjose:9092")


def _path_and_replica(p: argparse.ArgumentParser) -> None:
    p.add_argument("--path", metavar="PATH", required=True, help="the source stream (on this cluster)")
    p.add_argument("--replica", metavar="HOST:PORT/PATH", required=True, type=_replica, help=REPLICA_HELP)


# running ---------------------------------------------------------------------------


def _request(args: argparse.Namespace) -> dict[str, Any]:
    names = ("path", "replica", "upstream", "paused", "throttle", "compression", "cluster_uuid")
    return {n: getattr(args, n) for n in names if getattr(args, n, None) not in (None, False)}


def _client(args: argparse.Namespace, servers: str | None = None) -> AdminClient:
    """A client of --bootstrap-server (or `servers`), logged in with --command-config's settings."""
    return AdminClient(servers or args.bootstrap_server, security=args.command_config)


def _op(op: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        return _answer(args, lambda: _client(args).call(op, **_request(args)))
    return run


def _answer(args: argparse.Namespace, call: Any) -> int:
    try:
        result = call()
    except (AdminError, BrokerUnreachable) as exc:
        return fail(str(exc), args.json)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
    return 0


def _run_autosetup(args: argparse.Namespace) -> int:
    def setup() -> list[dict[str, Any]]:
        source = _client(args)
        host, port, dest_path = parse_replica(args.replica)
        dest = _client(args, f"{host}:{port}")  # the same login on both clusters
        info = source.call("stream.info", path=args.path)
        policy = {name: info[name] for name in POLICY_FIELDS} | {"permissions": info["permissions"]}
        try:
            dest.call("stream.create", path=dest_path, policy=policy)
        except AdminError as exc:
            raise AdminError(exc.code, f"cannot create the destination stream: {exc} (autosetup makes a new "
                                       f"stream; use `stream replica add` for one that exists)") from None
        src_host, src_port = parse_bootstrap(args.bootstrap_server)[0]
        upstream = f"{src_host}:{src_port}{args.path}"
        options = {k: v for k, v in (("throttle", args.throttle), ("compression", args.compression)) if v is not None}
        # the clusters' UUIDs as each answers them here: neither broker needs to reach the other for this
        dest.call("upstream.add", path=dest_path, upstream=upstream, cluster_uuid=source.call("cluster.info")["uuid"])
        links = [source.call("replica.add", path=args.path, replica=args.replica, **options)]
        if args.multimaster:
            source.call("upstream.add", path=args.path, upstream=args.replica,
                        cluster_uuid=dest.call("cluster.info")["uuid"])
            links.append(dest.call("replica.add", path=dest_path, replica=upstream, **options))
        return links

    return _answer(args, setup)


def render(result: Any) -> str:
    """Replica links as a table; other answers as key: value lines."""
    if isinstance(result, dict) and "state" in result:
        result = [result]
    if isinstance(result, list) and (not result or "state" in result[0]):
        if not result:
            return "No replicas."
        return table(
            ["REPLICA", "CLUSTER", "STATE", "LAG-MESSAGES", "LAG-BYTES", "OLDEST-UNREPLICATED", "REASON"],
            [[r["replica"], r["cluster"], r["state"], r["lag_messages"], format_bytes(r["lag_bytes"]),
              format_time_ms(r["oldest_unreplicated_ms"]) if r["oldest_unreplicated_ms"] else None,
              r["reason"] or None] for r in result])
    if isinstance(result, list):
        if not result:
            return "No upstreams."
        return table(["STREAM", "UPSTREAM", "CLUSTER-UUID"],
                     [[r["stream"], r["upstream"], r.get("cluster")] for r in result])
    width = max(len(k) for k in result) + 2
    return "\n".join(f"{k + ':':<{width}}{v}" for k, v in result.items())
