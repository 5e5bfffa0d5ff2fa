"""Share groups in a replicated cluster: not served yet, and said so (UNSUPPORTED_VERSION with the reason, as
Kafka answers while share groups are disabled) rather than half-working with state on one broker only."""
from __future__ import annotations

from cluster_fixtures import start_cluster
from tidelake.protocol.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from tidelake.protocol.wire_client import WireClient


def test_a_cluster_refuses_share_group_heartbeats_with_the_reason(tmp_path):
    cluster = start_cluster(tmp_path / "c", 1)
    try:
        broker = next(iter(cluster.brokers.values()))
        with WireClient.connect(broker.bootstrap) as w:
            r = w.request(ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0, rack_id=None,
                                                     subscribed_topic_names=["t"]), 1, ShareGroupHeartbeatResponse)
        assert r.error_code == 35
        assert "single tidelake broker" in r.error_message
    finally:
        cluster.stop()
