"""A share group's membership kept in __consumer_offsets (KIP-932): a broker restarted under a live ShareConsumer
knows the member, its epoch and its assignment, and the consumer carries on without rejoining; DeleteGroups on a
share group removes it for good."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient

from tidelake import errors
from tidelake.broker.embedded import EmbeddedBroker
from tidelake.protocol.messages import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from tests.broker.test_share_groups import (CONFIG, DEADLINE_S, create_topic, poll_values, produce, share_consumer,
                                            wait_for_assignment, wire)


def describe(b: EmbeddedBroker, group: str):
    with wire(b) as w:
        [g] = w.request(ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1,
                        ShareGroupDescribeResponse).groups
    return g


def membership(g) -> tuple:
    """What a restart must keep: the group epoch and each member's epoch and assignment."""
    return g.group_epoch, {m.member_id: (m.member_epoch, sorted((tp.topic_id, tuple(sorted(tp.partitions)))
                                                               for tp in m.assignment.topic_partitions))
                           for m in g.members}


def consume(c: ShareConsumer, want: set[bytes], got: set[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not want <= got and time.monotonic() < deadline:
        got.update(m.value() for m in poll_values(c))


def test_a_restarted_broker_knows_a_live_share_consumers_membership(tmp_path):
    data = tmp_path / "data"
    b = EmbeddedBroker(data, config=CONFIG).start()
    port = b.port
    c = None
    try:
        bs = b.bootstrap_servers
        create_topic(bs, "kept", partitions=2)
        first = set(produce(bs, "kept", 20, "a", partition=0) + produce(bs, "kept", 20, "a", partition=1))
        c = share_consumer(bs, "members")
        c.subscribe(["kept"])
        got: set[bytes] = set()
        consume(c, first, got)
        assert first <= got
        # a second member joins and leaves, so the group's epoch is past what a group joined afresh reaches
        other = share_consumer(bs, "members")
        other.subscribe(["kept"])
        wait_for_assignment(b, "members", 2)
        other.close()
        wait_for_assignment(b, "members", 1)
        before = membership(describe(b, "members"))
        b.stop()
        b = EmbeddedBroker(data, port=port, config=CONFIG).start()
        after = describe(b, "members")
        assert after.error_code == 0, after.error_message
        assert membership(after) == before  # replayed from __consumer_offsets, whether or not it heartbeat since
        more = set(produce(b.bootstrap_servers, "kept", 20, "b", partition=0)
                   + produce(b.bootstrap_servers, "kept", 20, "b", partition=1))
        consume(c, more, got)
        assert more <= got
        # the consumer went on with its epoch: not fenced, not rejoined (a rejoin bumps the group epoch)
        assert membership(describe(b, "members")) == before
    finally:
        if c is not None:
            c.close()
        b.stop()


def test_delete_groups_removes_a_share_group_for_good(tmp_path):
    data = tmp_path / "data"
    with EmbeddedBroker(data, config=CONFIG) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "gone")
        values = produce(bs, "gone", 5)
        c = share_consumer(bs, "deleted")
        c.subscribe(["gone"])
        try:
            wait_for_assignment(b, "deleted", 1)
            admin = AdminClient({"bootstrap.servers": bs})
            with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):  # it has a member
                admin.delete_consumer_groups(["deleted"])["deleted"].result(15)
        finally:
            c.close()
        deadline = time.monotonic() + DEADLINE_S
        while describe(b, "deleted").members:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        admin.delete_consumer_groups(["deleted"])["deleted"].result(15)
        assert describe(b, "deleted").error_code == errors.GroupIdNotFound.code
    with EmbeddedBroker(data, config=CONFIG) as b:  # its tombstones replayed: still gone
        assert describe(b, "deleted").error_code == errors.GroupIdNotFound.code
        c = share_consumer(b.bootstrap_servers, "deleted")  # and its share state with it: a new group reads all
        try:
            c.subscribe(["gone"])
            again: set[bytes] = set()
            consume(c, set(values), again)
            assert again == set(values)
        finally:
            c.close()
