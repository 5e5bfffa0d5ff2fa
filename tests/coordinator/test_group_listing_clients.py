"""Classic groups as a real client lists and describes them (confluent-kafka's AdminClient against
an EmbeddedBroker): a group whose last member left is still a ``consumer`` group, not a "simple"
one, before and after a broker restart, as with Kafka."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, ConsumerGroupState
from confluent_kafka.admin import AdminClient

from clients import create_topics, produce_confluent, sample_records
from tidelake.broker.embedded import EmbeddedBroker

CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def listing(admin: AdminClient, group: str):
    result = admin.list_consumer_groups(request_timeout=15).result(30)
    assert not result.errors, result.errors
    return next((g for g in result.valid if g.group_id == group), None)


def description(admin: AdminClient, group: str):
    return admin.describe_consumer_groups([group], request_timeout=15)[group].result(30)


def wait_for_state(admin: AdminClient, group: str, state: ConsumerGroupState, timeout_s: float = 30):
    deadline = time.monotonic() + timeout_s
    g = listing(admin, group)
    while (g is None or g.state != state) and time.monotonic() < deadline:
        time.sleep(0.1)
        g = listing(admin, group)
    return g


def test_an_emptied_classic_group_stays_a_consumer_group(tmp_path):
    data = tmp_path / "data"
    with EmbeddedBroker(data, config=CONFIG) as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        create_topics(bs, ["t"], 2)
        produce_confluent(bs, "t", sample_records("g", 4, 2))
        consumer = Consumer({"bootstrap.servers": bs, "group.id": "g", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        try:
            consumer.subscribe(["t"])
            deadline = time.monotonic() + 60
            msg = None
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
            assert msg is not None and not msg.error()
            consumer.commit(message=msg, asynchronous=False)
            stable = description(admin, "g")
            assert (stable.state, stable.is_simple_consumer_group, len(stable.members)) == \
                (ConsumerGroupState.STABLE, False, 1)
        finally:
            consumer.close()  # LeaveGroup: the group's last member is gone

        listed = wait_for_state(admin, "g", ConsumerGroupState.EMPTY)
        assert listed is not None and (listed.state, listed.is_simple_consumer_group) == \
            (ConsumerGroupState.EMPTY, False)
        empty = description(admin, "g")
        assert (empty.state, empty.is_simple_consumer_group, empty.members) == (ConsumerGroupState.EMPTY, False, [])

    with EmbeddedBroker(data, config=CONFIG) as b:  # the GroupMetadataValue written kept the type
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        listed = listing(admin, "g")
        assert listed is not None and (listed.state, listed.is_simple_consumer_group) == \
            (ConsumerGroupState.EMPTY, False)
        reloaded = description(admin, "g")
        assert (reloaded.state, reloaded.is_simple_consumer_group, reloaded.members) == \
            (ConsumerGroupState.EMPTY, False, [])
