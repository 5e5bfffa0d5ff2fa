"""Group APIs at the wire level, for behaviour the client libraries do not show directly:
FindCoordinator versions/key types, the MEMBER_ID_REQUIRED dance, generation checks on
OffsetCommit, metadata round-trip, OffsetFetch v8 multi-group, OffsetDelete, DeleteGroups,
ListGroups filters, and where the records land in __consumer_offsets."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
                                     OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest)
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.protocol.metadata import FindCoordinatorRequest

from tidelake.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from tidelake.broker.embedded import EmbeddedBroker
from tidelake.coordinator.offsets import OFFSETS_TOPIC, decode_key, decode_offset_value, partition_for
from tidelake.protocol.records import decode_records
from tidelake.protocol.wire_client import WireClient

NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 0, 22, 25, 27
INVALID_REQUEST, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED = 42, 68, 69, 79
GROUP_SUBSCRIBED_TO_TOPIC, FENCED_MEMBER_EPOCH = 86, 110


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        b.broker.create_topic("t", 2)
        yield b


@pytest.fixture
def wire(broker):
    with WireClient.connect(broker.bootstrap_servers, client_id="wire") as w:
        yield w


def subscription(*topics: str) -> bytes:
    return bytes(ConsumerProtocolSubscription(version=0, topics=list(topics), user_data=None).encode(version=0))


def join(wire, member_id="", version=5, protocols=(("range", None),), topics=("t",)):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return wire.request(JoinGroupRequest(
        group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
        group_instance_id=None, protocol_type="consumer", reason=None,
        protocols=[P(name=n, metadata=m or subscription(*topics)) for n, m in protocols]), version)


def commit(wire, group, generation, member, offsets, version=8, metadata="meta"):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return wire.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member, group_instance_id=None,
        retention_time_ms=-1, topics=[T(name="t", partitions=[
            P(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=metadata)
            for p, o in offsets.items()])]), version)


def test_find_coordinator_versions_and_key_types(broker, wire):
    port = broker.port
    r0 = wire.request(FindCoordinatorRequest(key="g"), 0)
    assert (r0.error_code, r0.node_id, r0.port) == (0, broker.broker.context.node_id, port)
    r3 = wire.request(FindCoordinatorRequest(key="txn-id", key_type=1), 3)
    assert (r3.error_code, r3.host, r3.port) == (0, "127.0.0.1", port)
    r4 = wire.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b", "c"]), 4)
    assert [(c.key, c.error_code, c.port) for c in r4.coordinators] == [("a", 0, port), ("b", 0, port), ("c", 0, port)]
    bad = wire.request(FindCoordinatorRequest(key_type=2, coordinator_keys=["s"]), 6)
    assert bad.coordinators[0].error_code == INVALID_REQUEST


def test_member_id_required_then_generation_checked_commits_round_trip_metadata(broker, wire):
    first = join(wire)
    assert first.error_code == MEMBER_ID_REQUIRED and first.member_id.startswith("wire-")
    joined = join(wire, member_id=first.member_id)
    assert joined.error_code == NONE and joined.generation_id == 1 and joined.leader == first.member_id
    assert joined.protocol_name == "range" and [m.member_id for m in joined.members] == [first.member_id]
    mid, gen = joined.member_id, joined.generation_id
    # before SyncGroup completes the generation, commits are refused
    assert commit(wire, "g", gen, mid, {0: 5}).topics[0].partitions[0].error_code == REBALANCE_IN_PROGRESS
    A = SyncGroupRequest.SyncGroupRequestAssignment
    synced = wire.request(SyncGroupRequest(group_id="g", generation_id=gen, member_id=mid, group_instance_id=None,
                                           protocol_type="consumer", protocol_name="range",
                                           assignments=[A(member_id=mid, assignment=b"my-assignment")]), 5)
    assert (synced.error_code, synced.assignment) == (NONE, b"my-assignment")
    assert wire.request(HeartbeatRequest(group_id="g", generation_id=gen, member_id=mid,
                                         group_instance_id=None), 4).error_code == NONE
    assert commit(wire, "g", gen + 1, mid, {0: 5}).topics[0].partitions[0].error_code == ILLEGAL_GENERATION
    assert commit(wire, "g", gen, "stranger", {0: 5}).topics[0].partitions[0].error_code == UNKNOWN_MEMBER_ID
    assert commit(wire, "g", -1, "", {0: 5}).topics[0].partitions[0].error_code == UNKNOWN_MEMBER_ID  # group busy
    ok = commit(wire, "g", gen, mid, {0: 5, 1: 9}, metadata="checkpoint-42")
    assert [p.error_code for p in ok.topics[0].partitions] == [NONE, NONE]

    fetched = wire.request(OffsetFetchRequest(group_id="g", topics=None, require_stable=False), 7)
    got = {(p.partition_index, p.committed_offset, p.metadata) for t in fetched.topics for p in t.partitions}
    assert got == {(0, 5, "checkpoint-42"), (1, 9, "checkpoint-42")}

    # the records are Kafka's OffsetCommitKey/Value in partition abs(hash("g")) % 50
    plog = broker.broker.logs.get(OFFSETS_TOPIC, partition_for("g"))
    offsets = {}
    for header, data in plog.iter_batches(0):
        for r in decode_records(data, 0, header):
            k = decode_key(r.key)
            if hasattr(k, "topic"):
                offsets[(k.topic, k.partition)] = decode_offset_value(r.value).offset
    assert offsets == {("t", 0): 5, ("t", 1): 9}
    assert broker.broker.context.topics.get(OFFSETS_TOPIC).partitions == 50
    assert broker.broker.context.topics.get(OFFSETS_TOPIC).internal
    assert broker.broker.context.topics.log_config(OFFSETS_TOPIC).cleanup_policy == "compact"

    # the group is active: it cannot be deleted, and its subscribed topic's offsets cannot be deleted
    assert wire.request(DeleteGroupsRequest(groups_names=["g"]), 2).results[0].error_code == NON_EMPTY_GROUP
    OT = OffsetDeleteRequest.OffsetDeleteRequestTopic
    od = wire.request(OffsetDeleteRequest(group_id="g", topics=[OT(name="t", partitions=[
        OT.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert od.topics[0].partitions[0].error_code == GROUP_SUBSCRIBED_TO_TOPIC
    listed = wire.request(ListGroupsRequest(states_filter=["stable"], types_filter=[]), 5)
    assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [("g", "Stable", "classic")]
    assert wire.request(ListGroupsRequest(states_filter=["Empty"]), 4).groups == []

    M = LeaveGroupRequest.MemberIdentity
    left = wire.request(LeaveGroupRequest(group_id="g", members=[M(member_id=mid, group_instance_id=None, reason="bye")]), 5)
    assert left.members[0].error_code == NONE
    od = wire.request(OffsetDeleteRequest(group_id="g", topics=[OT(name="t", partitions=[
        OT.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert od.error_code == NONE and od.topics[0].partitions[0].error_code == NONE
    fetched = wire.request(OffsetFetchRequest(group_id="g", topics=None), 7)
    assert {p.partition_index for t in fetched.topics for p in t.partitions} == {1}
    assert wire.request(DeleteGroupsRequest(groups_names=["g", "nope"]), 2).results[0].error_code == NONE
    results = wire.request(DeleteGroupsRequest(groups_names=["nope"]), 2).results
    assert results[0].error_code == GROUP_ID_NOT_FOUND
    assert wire.request(ListGroupsRequest(), 3).groups == []


def test_offset_fetch_v8_many_groups(broker, wire):
    assert commit(wire, "a", -1, "", {0: 1}).topics[0].partitions[0].error_code == NONE
    assert commit(wire, "b", -1, "", {1: 2}).topics[0].partitions[0].error_code == NONE
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    r = wire.request(OffsetFetchRequest(groups=[
        G(group_id="a", topics=None), G(group_id="b", topics=[T(name="t", partition_indexes=[0, 1])]),
        G(group_id="c", topics=None)], require_stable=False), 8)
    got = {g.group_id: sorted((p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions)
           for g in r.groups}
    assert got == {"a": [(0, 1)], "b": [(0, -1), (1, 2)], "c": []}


def test_consumer_group_heartbeat_and_describe_on_the_wire(broker, wire):
    topic_id = broker.broker.context.topics.get("t").topic_id
    hb = wire.request(ConsumerGroupHeartbeatRequest(group_id="kg", member_id="", member_epoch=0,
                                                    rebalance_timeout_ms=5000, subscribed_topic_names=["t"],
                                                    server_assignor="range"), 0)
    assert hb.error_code == NONE and hb.member_epoch == 1 and hb.member_id
    assert [(tp.topic_id, sorted(tp.partitions)) for tp in hb.assignment.topic_partitions] == [(topic_id, [0, 1])]
    stale = wire.request(ConsumerGroupHeartbeatRequest(group_id="kg", member_id=hb.member_id, member_epoch=5), 1)
    assert stale.error_code == FENCED_MEMBER_EPOCH
    d = wire.request(ConsumerGroupDescribeRequest(group_ids=["kg", "g-none"], include_authorized_operations=False), 1)
    kg, missing = d.groups
    assert (kg.group_state, kg.assignor_name, kg.group_epoch, kg.assignment_epoch) == ("Stable", "range", 1, 1)
    member = kg.members[0]
    assert member.member_id == hb.member_id and member.member_type == 1
    assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [("t", [0, 1])]
    assert missing.error_code == GROUP_ID_NOT_FOUND
    # DescribeGroups knows only classic groups, as in Kafka 4.x: Dead, and GROUP_ID_NOT_FOUND from v6
    for version, code in ((5, NONE), (6, GROUP_ID_NOT_FOUND)):
        (g,) = wire.request(DescribeGroupsRequest(groups=["kg"], include_authorized_operations=False), version).groups
        assert (g.error_code, g.group_state, g.members) == (code, "Dead", [])
    left = wire.request(ConsumerGroupHeartbeatRequest(group_id="kg", member_id=hb.member_id, member_epoch=-1), 0)
    assert left.error_code == NONE and left.member_epoch == -1

    # the group's KIP-848 records, then the member's tombstones, in partition abs(hash("kg")) % 50
    plog = broker.broker.logs.get(OFFSETS_TOPIC, partition_for("kg"))
    records = [(decode_key(r.key), r.value) for header, data in plog.iter_batches(0)
               for r in decode_records(data, 0, header)]
    written = {k.record_type for k, v in records if v is not None}
    assert written == {3, 4, 5, 6, 7, 8}  # epoch, subscription metadata, member, target (2), current
    tombstoned = [k for k, v in records if v is None]
    assert {(k.record_type, k.member_id) for k in tombstoned} == {(8, hb.member_id), (7, hb.member_id),
                                                                   (5, hb.member_id)}
