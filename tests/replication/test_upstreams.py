"""Upstreams are enforced: a stream that lists upstreams takes replication only from them."""

from __future__ import annotations

import pytest

from kafkacompat.admin.client import AdminError
from kafkacompat.testing import Broker

from .helpers import admin, end_offset, link_state, replica, wait_for


@pytest.fixture
def trio(tmp_path):
    brokers = [Broker(str(tmp_path / name), cluster_name=name).start() for name in ("sanjose", "newyork", "london")]
    for broker in brokers:
        admin(broker).call("stream.create", path="/s")
    yield brokers
    for broker in reversed(brokers):
        broker.stop()


def state_of(broker: Broker) -> dict:
    [link] = link_state(broker, "/s")
    return link


def test_only_listed_upstreams_may_replicate_and_removing_one_stops_it(trio):
    a, b, c = trio
    answer = admin(b).call("upstream.add", path="/s", upstream=replica(c, "/s"))
    assert answer["cluster"] == str(c.server.store.store_id)  # asked of London itself
    a.produce("/s:t", b"from sanjose")
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    link = wait_for(lambda: (lambda entry: entry if entry["state"] == "broken" else None)(state_of(a)),
                    what="link refused by newyork")
    assert "takes replication only from its upstreams" in link["reason"]
    assert f"127.0.0.1:{c.port}/s" in link["reason"] and "sanjose" in link["reason"]
    assert b.server.store.get_topic("/s", "t") is None  # nothing arrived
    # New York lists San Jose too: after a resume the link flows
    admin(b).call("upstream.add", path="/s", upstream=replica(a, "/s"))
    admin(a).call("replica.resume", path="/s", replica=replica(b, "/s"))
    wait_for(lambda: end_offset(b, "/s", "t") == 1 and state_of(a)["state"] == "in-sync", what="link accepted")
    # removing the upstream stops it, as `maprcli stream upstream remove` does
    admin(b).call("upstream.remove", path="/s", upstream=replica(a, "/s"))
    a.produce("/s:t", b"after removal")
    wait_for(lambda: state_of(a)["state"] == "broken", what="link refused again")
    assert end_offset(b, "/s", "t") == 1 and state_of(a)["lag_messages"] == 1


def test_a_stream_with_no_upstreams_takes_any_source(trio):
    a, b, _ = trio
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    a.produce("/s:t", b"x")
    wait_for(lambda: end_offset(b, "/s", "t") == 1, what="replicated")


def test_an_unreachable_upstream_cannot_be_added_without_its_uuid(trio):
    _, b, _ = trio
    with pytest.raises(AdminError, match="cannot reach upstream 127.0.0.1:9 to learn its cluster"):
        admin(b).call("upstream.add", path="/s", upstream="127.0.0.1:9/s")
    answer = admin(b).call("upstream.add", path="/s", upstream="127.0.0.1:9/s", cluster_uuid="0" * 32)
    assert answer["cluster"] == "0" * 32


def test_a_ring_closes_on_an_upstream_that_lists_upstreams_itself(trio):
    """Closing a ring a -> b -> c -> a with upstreams on every stream: a registers c, whose stream lists b.
    `upstream add` asks c which cluster it is; c's own upstream list must not keep it from saying."""
    a, b, c = trio
    for src, dst in ((a, b), (b, c)):
        admin(dst).call("upstream.add", path="/s", upstream=replica(src, "/s"))
        admin(src).call("replica.add", path="/s", replica=replica(dst, "/s"))
    answer = admin(a).call("upstream.add", path="/s", upstream=replica(c, "/s"))
    assert answer["cluster"] == str(c.server.store.store_id)
    admin(c).call("replica.add", path="/s", replica=replica(a, "/s"))
    for i in range(5):
        a.produce("/s:t", f"v{i}".encode())
    wait_for(lambda: all(end_offset(x, "/s", "t") == 5 for x in trio), what="every record everywhere")
    wait_for(lambda: all(state_of(x)["state"] == "in-sync" for x in trio), what="the three links in sync")
    assert end_offset(a, "/s", "t") == 5  # nothing came back around the ring
