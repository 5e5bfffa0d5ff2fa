"""A share group's membership in a 3-broker cluster (KIP-932): kept in __consumer_offsets, so when the group's
coordinator is kill -9'd the next leader of the group's partition describes the same members, epochs and group
epoch, the ShareConsumers go on with them (not fenced, not rejoined) and every record is delivered."""
from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from cluster_fixtures import find_coordinator, start_cluster, wait_until
from tests.cluster.test_share_groups import (CONFIGS, RECORDS, TOPIC, ShareReader, create_topic_broker_3_leads_none,
                                             delivered_values, leaders, persisted_state, produce_once_initialized,
                                             topic_id)
from tidelake.coordinator.offsets import OFFSETS_TOPIC, partition_for
from tidelake.protocol.messages import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from tidelake.protocol.wire_client import WireClient

NOT_COORDINATOR, GROUP_ID_NOT_FOUND = 16, 69


def describe(cluster, broker_id: int, group: str):
    with WireClient("127.0.0.1", cluster.brokers[broker_id].port) as c:
        [g] = c.request(ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1,
                        ShareGroupDescribeResponse).groups
    return g


def membership(g) -> tuple:
    return g.error_code, g.group_epoch, {m.member_id: (m.member_epoch, sorted(
        (tp.topic_id, tuple(sorted(tp.partitions))) for tp in m.assignment.topic_partitions)) for m in g.members}


@pytest.mark.slow_faults
def test_a_new_group_coordinator_has_the_share_groups_members_and_its_consumers_go_on(tmp_path):
    """Broker 3 leads no partition of the topic but coordinates the group (the group id is chosen so): its kill
    moves the group's coordination, which the next leader of the group's __consumer_offsets partition replays."""
    cluster = start_cluster(tmp_path / "c", 3, **CONFIGS)
    try:
        create_topic_broker_3_leads_none(cluster)
        find_coordinator(cluster, 0, "probe")  # creates __consumer_offsets
        offsets_leaders = wait_until(f"{OFFSETS_TOPIC}'s leaders", lambda: (
            lambda ls: ls if ls and all(b > 0 for b in ls.values()) else None)(leaders(cluster, OFFSETS_TOPIC)), 60)
        group = next(g for g in (f"members-{i}" for i in range(1000))
                     if offsets_leaders[partition_for(g, len(offsets_leaders))] == 3)
        assert find_coordinator(cluster, 0, group) == 3
        tid = topic_id(cluster)
        readers = [ShareReader(cluster.bootstrap_servers, group, f"reader-{i}") for i in range(2)]
        try:
            for r in readers:
                r.start()
            acked = produce_once_initialized(cluster, group, tid, 2)
            wanted = set(acked.values())

            def seen() -> set[bytes]:
                return delivered_values(readers)

            def stable():
                g = describe(cluster, 3, group)
                settled = (len(g.members) == 2 and all(m.member_epoch == g.group_epoch for m in g.members)
                           and all(m.assignment.topic_partitions for m in g.members))
                return membership(g) if settled else None
            wait_until("a third of the records delivered", lambda: len(seen()) >= RECORDS // 3, 60)
            before = wait_until("both members at the group's epoch, each assigned", stable, 60)
            cluster.kill_broker(3)
            assert len(seen()) < RECORDS, "every record was delivered before the kill: nothing was tested"

            def new_coordinator_answer():
                for broker_id in (1, 2):
                    g = describe(cluster, broker_id, group)
                    if g.error_code != NOT_COORDINATOR:
                        return g
                return None
            after = wait_until("a new coordinator of the group", new_coordinator_answer, 60)
            assert membership(after) == before  # the members, their epochs and assignments, the group epoch
            wait_until("every record delivered after the kill", lambda: seen() >= wanted, 60)
            assert not [f for r in readers for f in r.failures]
            # the consumers went on with their epochs: a fenced or rejoining member would have bumped the group epoch
            coordinator = find_coordinator(cluster, 0, group)
            assert membership(describe(cluster, coordinator, group)) == before
        finally:
            for r in readers:
                r.stopping.set()
            for r in readers:
                r.join(30)
        # DeleteGroups at the new coordinator, once the consumers left: the group and its share state are gone
        wait_until("the consumers gone", lambda: not describe(cluster, coordinator, group).members, 30)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.delete_consumer_groups([group])[group].result(30)
        assert describe(cluster, coordinator, group).error_code == GROUP_ID_NOT_FOUND
        for p in range(2):  # the share coordinators answer "no state" (start offset -1), not its consumed state
            state = persisted_state(cluster, group, tid, p)
            assert state is None or (state[1].start_offset == -1 and not state[1].state_batches), state
    finally:
        cluster.stop()
