"""A streams group (KIP-1071) kept across a broker restart: its StreamsGroup* records in __consumer_offsets are
replayed, so a member joined over the wire (as Kafka Streams' heartbeat does) goes on with its epoch and tasks; its
offset commits are checked against that epoch."""
from __future__ import annotations

from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest

from tidelake.broker import EmbeddedBroker
from tidelake.protocol.messages import StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest
from txn_helpers import create_topics, raw_request


def describe_group(bs: str, group_id: str):
    request = StreamsGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False)
    return raw_request(bs, request, 0).groups[0]


def test_a_broker_restart_keeps_the_group(tmp_path):
    H = StreamsGroupHeartbeatRequest
    S = H.Topology.Subtopology
    topology = H.Topology(epoch=0, subtopologies=[
        S(subtopology_id="0", source_topics=["in"], source_topic_regex=[], repartition_sink_topics=[],
          repartition_source_topics=[], copartition_groups=[],
          state_changelog_topics=[S.TopicInfo(name="app-store-changelog", partitions=0, replication_factor=0,
                                              topic_configs=[])])])

    def heartbeat(bs: str, epoch: int, **fields):
        return raw_request(bs, H(group_id="restart-app", member_id="m1", member_epoch=epoch,
                                 endpoint_information_epoch=0, instance_id=None, rack_id=None,
                                 rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", -1),
                                 topology=fields.pop("topology", None), process_id=fields.pop("process_id", None),
                                 user_endpoint=None, client_tags=fields.pop("client_tags", None), task_offsets=None,
                                 task_end_offsets=None, shutdown_application=False, **fields), 0)

    data = tmp_path / "data"
    with EmbeddedBroker(data) as b:
        create_topics(b.bootstrap_servers, {"in": 3})
        r = heartbeat(b.bootstrap_servers, 0, rebalance_timeout_ms=30000, topology=topology, process_id="p1",
                      client_tags=[], active_tasks=[], standby_tasks=[], warmup_tasks=[])
        assert r.error_code == 0 and [s.status_code for s in r.status] == [3]   # MISSING_INTERNAL_TOPICS: created
        r = heartbeat(b.bootstrap_servers, r.member_epoch, active_tasks=[], standby_tasks=[], warmup_tasks=[])
        assert r.error_code == 0 and r.status == [] and [(t.subtopology_id, t.partitions) for t in r.active_tasks] \
            == [("0", [0, 1, 2])]
        epoch = r.member_epoch
    with EmbeddedBroker(data) as b:
        g = describe_group(b.bootstrap_servers, "restart-app")
        assert (g.error_code, g.group_state, [(m.member_id, m.member_epoch) for m in g.members]) == \
            (0, "Stable", [("m1", epoch)])
        T = H.TaskIds
        r = heartbeat(b.bootstrap_servers, epoch, active_tasks=[T(subtopology_id="0", partitions=[0, 1, 2])],
                      standby_tasks=[], warmup_tasks=[])
        # nothing moved (the new coordinator answers the member's tasks once again: the same)
        assert (r.error_code, r.member_epoch, [(t.subtopology_id, t.partitions) for t in r.active_tasks]) == \
            (0, epoch, [("0", [0, 1, 2])])
        # the member commits with its epoch, on OffsetCommit v9+ as Kafka's streams groups require
        C = OffsetCommitRequest
        T = C.OffsetCommitRequestTopic

        def commit(version: int, member_epoch: int) -> int:
            request = C(group_id="restart-app", generation_id_or_member_epoch=member_epoch, member_id="m1",
                        group_instance_id=None, topics=[T(name="in", partitions=[T.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])])
            return raw_request(b.bootstrap_servers, request, version).topics[0].partitions[0].error_code
        assert (commit(8, epoch), commit(9, epoch - 1), commit(9, epoch)) == (35, 113, 0)   # UNSUPPORTED_VERSION,
        # STALE_MEMBER_EPOCH; and DescribeGroups, the classic groups' API, does not describe it (as Kafka 4.x's)
        d = raw_request(b.bootstrap_servers, DescribeGroupsRequest(groups=["restart-app"],
                                                                   include_authorized_operations=False), 6).groups[0]
        assert (d.error_code, d.group_state) == (69, "Dead")
