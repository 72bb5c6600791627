"""The admin API's replication operations (`kafkacompat stream replica|upstream`, `cluster info`).

They ride on the private StreamAdmin API (handlers/stream_admin.py) like
every other CLI command: JSON in, JSON out, input checked before anything
changes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafkacompat import storage

from ..security.client import ClientSecurity
from ..security.scram import AuthenticationFailed
from .engine import LinkTask, ReplicationService
from .link_client import LinkClient, LinkRefused
from .links import LinkSpec, LinkSpecError, check_settings, parse_replica

log = logging.getLogger(__name__)

UPSTREAM_TIMEOUT_S = 5.0


class ReplicaOpError(ValueError):
    """A refused replication request (answered as INVALID_REQUEST with this message)."""


def _service(cluster: Any) -> ReplicationService:
    service = cluster.replication
    if service is None:
        raise ReplicaOpError("replication is not running on this broker")
    return service


def _source(cluster: Any, request: dict[str, Any]) -> str:
    path = request.get("path")
    if not isinstance(path, str):
        raise ReplicaOpError("missing 'path': the stream")
    if cluster.store.get_stream(path) is None:
        raise storage.UnknownStreamError(f"stream {path} does not exist")
    return path


def _link(cluster: Any, request: dict[str, Any]) -> LinkTask:
    path = _source(cluster, request)
    replica = request.get("replica")
    if not isinstance(replica, str):
        raise ReplicaOpError("missing 'replica': HOST:PORT/stream/path")
    try:
        host, port, dest = parse_replica(replica)
    except LinkSpecError as exc:
        raise ReplicaOpError(str(exc)) from None
    name = LinkSpec(path, host, port, dest).replica
    task = _service(cluster).links.get((path, name))
    if task is None:
        raise ReplicaOpError(f"stream {path} has no replica {replica}")
    return task


async def replica_add(cluster: Any, request: dict[str, Any]) -> Any:
    service = _service(cluster)
    path = _source(cluster, request)
    try:
        host, port, dest = parse_replica(str(request.get("replica") or ""))
        check_settings(request.get("throttle"), request.get("compression"))
    except LinkSpecError as exc:
        raise ReplicaOpError(str(exc)) from None
    spec = LinkSpec(path, host, port, dest, paused=bool(request.get("paused")),
                    throttle_mb_s=float(request.get("throttle") or 0), compression=request.get("compression") or "none")
    if (path, spec.replica) in service.links:
        raise ReplicaOpError(f"stream {path} already replicates to {spec.replica}")
    task = await service.add_link(spec)
    log.info("replica added: %s -> %s", path, spec.replica)
    return await task.status()


async def replica_edit(cluster: Any, request: dict[str, Any]) -> Any:
    task = _link(cluster, request)
    throttle, compression = request.get("throttle"), request.get("compression")
    try:
        check_settings(throttle, compression)
    except LinkSpecError as exc:
        raise ReplicaOpError(str(exc)) from None
    if throttle is None and compression is None:
        raise ReplicaOpError("nothing to change: give --throttle or --compression")
    if throttle is not None:
        task.spec.throttle_mb_s = float(throttle)
    if compression is not None:
        task.spec.compression = compression
    await _service(cluster).save_link(task.spec)
    task.poke()
    return await task.status()


async def _set_paused(cluster: Any, request: dict[str, Any], paused: bool) -> Any:
    task = _link(cluster, request)
    task.spec.paused = paused
    await _service(cluster).save_link(task.spec)
    if not paused and task.state == "broken":
        task.state, task.reason = "pending", "resumed after: " + task.reason
    task.poke()
    log.info("replica %s: %s -> %s", "paused" if paused else "resumed", task.spec.source, task.spec.replica)
    return await task.status()


async def replica_pause(cluster: Any, request: dict[str, Any]) -> Any:
    return await _set_paused(cluster, request, True)


async def replica_resume(cluster: Any, request: dict[str, Any]) -> Any:
    return await _set_paused(cluster, request, False)


async def replica_remove(cluster: Any, request: dict[str, Any]) -> Any:
    task = _link(cluster, request)
    await _service(cluster).remove_link(task)
    log.info("replica removed: %s -> %s", task.spec.source, task.spec.replica)
    return {"stream": task.spec.source, "replica": task.spec.replica}


async def replica_list(cluster: Any, request: dict[str, Any]) -> Any:
    path = _source(cluster, request)
    return [await task.status() for task in _service(cluster).links_of(path)]


def _upstream(request: dict[str, Any]) -> tuple[str, str, int, str]:
    """(name, host, port, stream path) of the request's upstream."""
    upstream = request.get("upstream")
    try:
        host, port, path = parse_replica(str(upstream or ""))
    except LinkSpecError as exc:
        raise ReplicaOpError(str(exc).replace("replica", "upstream", 1)) from None
    return LinkSpec("", host, port, path).replica, host, port, path


async def _cluster_of(host: str, port: int, security: ClientSecurity | None) -> str:
    """The UUID of the cluster at HOST:PORT, asked over the replication API (the upstream's own answer),
    connecting as this broker's links do (--replication-client-config). It asks with `ping`, which names no
    stream: a `hello` for the upstream's stream is judged by that stream's own upstream list, so an upstream
    that itself lists upstreams (the next cluster of a chain, the one closing a ring) refused to name itself."""
    try:
        client = await LinkClient.connect(host, port, timeout=UPSTREAM_TIMEOUT_S, security=security)
    except (OSError, asyncio.TimeoutError, AuthenticationFailed) as exc:
        raise ReplicaOpError(f"cannot reach upstream {host}:{port} to learn its cluster ({exc or 'timed out'}); "
                             f"add it once it is reachable, or give its cluster UUID") from None
    try:
        return str((await client.call({"op": "ping"}))["uuid"])
    except (OSError, ConnectionError, asyncio.TimeoutError, LinkRefused) as exc:
        raise ReplicaOpError(f"upstream {host}:{port} did not say which cluster it is: {exc}") from None
    finally:
        await client.close()


async def upstream_add(cluster: Any, request: dict[str, Any]) -> Any:
    """Register an upstream by stream path and cluster UUID: the stream then takes replication only from
    its upstreams. The UUID is given (autosetup knows it) or asked of the upstream."""
    path = _source(cluster, request)
    name, host, port, upstream_path = _upstream(request)
    service = _service(cluster)
    if name in service.upstreams(path):
        raise ReplicaOpError(f"stream {path} already has upstream {name}")
    uuid = request.get("cluster_uuid")
    if not isinstance(uuid, str) or not uuid:
        uuid = await _cluster_of(host, port, service.link_security)
    await service.set_upstream(path, name, {"upstream": name, "cluster": uuid, "stream": upstream_path})
    return {"stream": path, "upstream": name, "cluster": uuid}


async def upstream_list(cluster: Any, request: dict[str, Any]) -> Any:
    path = _source(cluster, request)
    return [{"stream": path, "upstream": name, "cluster": record.get("cluster")}
            for name, record in sorted(_service(cluster).upstreams(path).items())]


async def upstream_remove(cluster: Any, request: dict[str, Any]) -> Any:
    path = _source(cluster, request)
    name = _upstream(request)[0]
    service = _service(cluster)
    if name not in service.upstreams(path):
        raise ReplicaOpError(f"stream {path} has no upstream {name}")
    await service.set_upstream(path, name, None)
    return {"stream": path, "upstream": name}


async def cluster_info(cluster: Any, request: dict[str, Any]) -> Any:
    service = _service(cluster)
    return {"name": service.identity.name, "uuid": service.identity.id, "cluster_id": cluster.cluster_id,
            "node_id": cluster.node_id, "replica_links": len(service.links)}


OPS = {
    "replica.add": replica_add,
    "replica.edit": replica_edit,
    "replica.pause": replica_pause,
    "replica.resume": replica_resume,
    "replica.remove": replica_remove,
    "replica.list": replica_list,
    "upstream.add": upstream_add,
    "upstream.list": upstream_list,
    "upstream.remove": upstream_remove,
    "cluster.info": cluster_info,
}
