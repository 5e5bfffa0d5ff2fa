"""The cluster APIs on a broker without zookeeper.connect: ElectLeaders has nothing to elect, the
controller's requests are refused (no controller to obey)."""
from __future__ import annotations

from kafka.protocol.admin import ElectLeadersRequest

from tidelake import errors
from tidelake.broker import EmbeddedBroker
from tidelake.protocol.messages import LeaderAndIsrRequest
from tidelake.protocol.wire_client import WireClient


def test_single_broker_answers_election_not_needed_and_refuses_controller_requests(tmp_path):
    with EmbeddedBroker(tmp_path) as b:
        b.run(b.broker.create_topic, "t", 2)
        T = ElectLeadersRequest.TopicPartitions
        with WireClient("127.0.0.1", b.port) as c:
            r = c.request(ElectLeadersRequest(election_type=0, timeout_ms=1000, topic_partitions=[
                T(topic="t", partitions=[0, 1]), T(topic="absent", partitions=[0])]), 2)
            codes = {(t.topic, p.partition_id): p.error_code for t in r.replica_election_results
                     for p in t.partition_result}
            assert codes == {("t", 0): errors.ElectionNotNeeded.code, ("t", 1): errors.ElectionNotNeeded.code,
                             ("absent", 0): errors.UnknownTopicOrPartition.code}
            lai = LeaderAndIsrRequest(controller_id=1, controller_epoch=1, max_broker_epoch=-1, topic_states=[],
                                      live_leaders=[])
            assert c.request(lai, 5).error_code == errors.StaleControllerEpoch.code
