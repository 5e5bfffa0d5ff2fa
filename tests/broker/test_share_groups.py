"""Share groups (KIP-932) with librdkafka's ShareConsumer (confluent-kafka 2.16): consumers sharing one
partition's records, a crashed consumer's records redelivered after their lock expires, REJECT and the
delivery-count limit, read_committed, restart survival, and the admin APIs (ListGroups type share,
ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets) over the wire."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                   ResourceType)
from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

from tidelake.broker.embedded import EmbeddedBroker
from tidelake.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateKey, decode_state_key
from tidelake.protocol.messages import (AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
                                        DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
                                        DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
                                        ShareFetchRequest, ShareFetchResponse, ShareGroupDescribeRequest,
                                        ShareGroupDescribeResponse, ShareGroupHeartbeatRequest,
                                        ShareGroupHeartbeatResponse)
from tidelake.protocol.wire_client import WireClient

LOCK_MS = 2000
CONFIG = {"group.share.heartbeat.interval.ms": "300",
          "group.share.record.lock.duration.ms": str(LOCK_MS), "group.share.session.timeout.ms": "6000",
          "group.share.delivery.count.limit": "3"}
DEADLINE_S = 30


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", config=CONFIG) as b:
        yield b


def create_topic(bs: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(15)


def produce(bs: str, topic: str, n: int, tag: str = "v", partition: int = 0) -> list[bytes]:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    values = [f"{tag}-{i:05d}".encode() for i in range(n)]
    for v in values:
        p.produce(topic, value=v, partition=partition)
    assert p.flush(15) == 0
    return values


def set_group_configs(bs: str, group: str, configs: dict[str, str]) -> None:
    """Kafka's way to configure one share group: IncrementalAlterConfigs on its GROUP resource."""
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                             incremental_configs=entries)]).values():
        f.result(15)


def share_consumer(bs: str, group: str, **extra) -> ShareConsumer:
    set_group_configs(bs, group, {"share.auto.offset.reset": "earliest"})  # Kafka's default: latest
    conf = {"bootstrap.servers": bs, "group.id": group}
    conf.update(extra)
    c = ShareConsumer(conf)
    return c


def poll_values(c: ShareConsumer, timeout: float = 0.5) -> list:
    return [m for m in c.poll(timeout) if m.error() is None]


def wire(b: EmbeddedBroker) -> WireClient:
    return WireClient.connect(b.bootstrap_servers)


def start_offsets(b: EmbeddedBroker, group: str, topic: str) -> dict[int, int]:
    R = DescribeShareGroupOffsetsRequest
    with wire(b) as w:
        r = w.request(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1,
                      DescribeShareGroupOffsetsResponse)
    return {p.partition_index: p.start_offset for g in r.groups for t in g.topics if t.topic_name == topic
            for p in t.partitions}


def test_consumers_share_one_partition_and_every_record_is_acknowledged_once(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "jobs")
    values = produce(bs, "jobs", 600)
    consumers = [share_consumer(bs, "workers", **{"share.acknowledgement.mode": "explicit", "max.poll.records": 25})
                 for _ in range(3)]
    holder: dict[int, int] = {}  # offset -> index of the consumer it was delivered to
    got: dict[int, list[bytes]] = {i: [] for i in range(3)}
    try:
        for c in consumers:
            c.subscribe(["jobs"])
        deadline = time.monotonic() + DEADLINE_S
        while len(holder) < len(values) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in poll_values(c, 0.2):
                    # no record is given to a second consumer while the first holds it (and none is redelivered:
                    # every delivery is acknowledged within the lock)
                    assert m.offset() not in holder, f"offset {m.offset()} delivered to {holder.get(m.offset())} and {i}"
                    holder[m.offset()] = i
                    got[i].append(m.value())
                    c.acknowledge(m)
                c.commit_sync(10)
    finally:
        for c in consumers:
            c.close()
    assert sorted(v for vs in got.values() for v in vs) == values
    assert sum(1 for vs in got.values() if vs) >= 2, {i: len(vs) for i, vs in got.items()}
    assert start_offsets(broker, "workers", "jobs") == {0: len(values)}  # the SPSO passed every record


CRASHING = textwrap.dedent("""
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
    c.subscribe([sys.argv[3]])
    while True:
        got = [m for m in c.poll(0.5) if m.error() is None]
        if got:
            print(" ".join(str(m.offset()) for m in got), flush=True)
            time.sleep(3600)  # holds its records, never acknowledges
""")


def test_a_crashed_consumers_records_are_redelivered_after_the_lock_expires(broker, tmp_path):
    bs = broker.bootstrap_servers
    create_topic(bs, "tasks")
    values = produce(bs, "tasks", 40)
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    set_group_configs(bs, "crashy", {"share.auto.offset.reset": "earliest"})
    proc = subprocess.Popen([sys.executable, str(script), bs, "crashy", "tasks"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], DEADLINE_S)
        assert ready, "the crashing consumer received nothing"
        held = [int(o) for o in proc.stdout.readline().split()]
        assert held
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    survivor = share_consumer(bs, "crashy", **{"share.acknowledgement.mode": "explicit"})
    delivered: dict[int, int] = {}
    try:
        survivor.subscribe(["tasks"])
        deadline = time.monotonic() + DEADLINE_S
        while len(delivered) < len(values) and time.monotonic() < deadline:
            for m in poll_values(survivor):
                assert m.offset() not in delivered
                delivered[m.offset()] = m.delivery_count()
                survivor.acknowledge(m)
            survivor.commit_sync(10)
    finally:
        survivor.close()
    assert sorted(delivered) == list(range(len(values)))
    # the crashed consumer's records came back once their lock ran out: their second delivery
    assert {o: delivered[o] for o in held} == {o: 2 for o in held}
    assert all(n == 1 for o, n in delivered.items() if o not in held)


def test_rejected_and_poison_records_are_not_delivered_again(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "poison")
    produce(bs, "poison", 10)
    c = share_consumer(bs, "careful", **{"share.acknowledgement.mode": "explicit"})
    deliveries: dict[int, int] = {}
    try:
        c.subscribe(["poison"])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and start_offsets(broker, "careful", "poison").get(0) != 10:
            for m in poll_values(c):
                deliveries[m.offset()] = deliveries.get(m.offset(), 0) + 1
                kind = (AcknowledgeType.REJECT if m.offset() == 3 else AcknowledgeType.RELEASE if m.offset() == 7
                        else AcknowledgeType.ACCEPT)
                c.acknowledge(m, kind)
            c.commit_sync(10)
    finally:
        c.close()
    assert deliveries[3] == 1  # rejected: archived at once
    assert deliveries[7] == 3  # released each time: archived at group.share.delivery.count.limit
    assert all(deliveries[o] == 1 for o in range(10) if o not in (3, 7))


def test_read_committed_share_group_never_delivers_aborted_records(tmp_path):
    with EmbeddedBroker(tmp_path / "data", config=CONFIG) as b:
        bs = b.bootstrap_servers
        set_group_configs(bs, "committed-only", {"share.isolation.level": "read_committed"})
        create_topic(bs, "txn")
        p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-share"})
        p.init_transactions(15)
        for outcome in ("first", "aborted", "second"):
            p.begin_transaction()
            for i in range(5):
                p.produce("txn", value=f"{outcome}-{i}".encode(), partition=0)
            if outcome == "aborted":
                p.abort_transaction(15)
            else:
                p.commit_transaction(15)
        c = share_consumer(bs, "committed-only")
        got = []
        try:
            c.subscribe(["txn"])
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < 10 and time.monotonic() < deadline:
                got += [m.value() for m in poll_values(c)]
            got += [m.value() for m in poll_values(c, 1.0)]  # nothing else arrives
        finally:
            c.close()
        assert sorted(got) == sorted(f"{t}-{i}".encode() for t in ("first", "second") for i in range(5))


def test_acknowledged_state_survives_a_broker_restart(tmp_path):
    data = tmp_path / "data"
    with EmbeddedBroker(data, config=CONFIG) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "durable")
        values = produce(bs, "durable", 100)
        c = share_consumer(bs, "keeper", **{"share.acknowledgement.mode": "explicit", "max.poll.records": 10})
        first: set[bytes] = set()
        try:
            c.subscribe(["durable"])
            deadline = time.monotonic() + DEADLINE_S
            while len(first) < 30 and time.monotonic() < deadline:
                for m in poll_values(c):
                    first.add(m.value())
                    c.acknowledge(m)
                c.commit_sync(10)
        finally:
            c.close()
        spso = start_offsets(b, "keeper", "durable")[0]
        assert spso == len(first)
    with EmbeddedBroker(data, config=CONFIG) as b:
        assert start_offsets(b, "keeper", "durable") == {0: spso}  # rebuilt from __share_group_state
        c = share_consumer(b.bootstrap_servers, "keeper")
        rest: list[bytes] = []
        try:
            c.subscribe(["durable"])
            deadline = time.monotonic() + DEADLINE_S
            while len(first) + len(rest) < len(values) and time.monotonic() < deadline:
                rest += [m.value() for m in poll_values(c)]
        finally:
            c.close()
    assert sorted(first | set(rest)) == values
    assert not first & set(rest) and len(rest) == len(set(rest))  # nothing acknowledged came back


def test_share_group_admin_apis(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "admin-t")
    produce(bs, "admin-t", 5)
    c = share_consumer(bs, "adm", **{"client.id": "adm-client"})
    try:
        c.subscribe(["admin-t"])
        deadline = time.monotonic() + DEADLINE_S
        got = 0
        while got < 5 and time.monotonic() < deadline:
            got += len(poll_values(c))
        with wire(broker) as w:
            d = w.request(ShareGroupDescribeRequest(group_ids=["adm", "nope"], include_authorized_operations=False),
                          1, ShareGroupDescribeResponse)
        adm, nope = d.groups
        assert (adm.error_code, adm.group_state, adm.assignor_name) == (0, "Stable", "simple")
        [member] = adm.members
        assert member.client_id == "adm-client" and member.subscribed_topic_names == ["admin-t"]
        assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [("admin-t", [0])]
        assert nope.error_code == 69  # GROUP_ID_NOT_FOUND
        with wire(broker) as w:
            listed = w.request(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5, ListGroupsResponse)
            classic = w.request(ListGroupsRequest(states_filter=[], types_filter=["classic"]), 5, ListGroupsResponse)
        assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [("adm", "share", "share")]
        assert "adm" not in {g.group_id for g in classic.groups}
        with wire(broker) as w:  # AlterShareGroupOffsets needs an empty group
            r = w.request(AlterShareGroupOffsetsRequest(group_id="adm", topics=[]), 0, AlterShareGroupOffsetsResponse)
        assert r.error_code == 68  # NON_EMPTY_GROUP
    finally:
        c.close()
    A = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    with wire(broker) as w:
        r = w.request(AlterShareGroupOffsetsRequest(group_id="adm", topics=[A(topic_name="admin-t", partitions=[
            A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=2)])]), 0,
            AlterShareGroupOffsetsResponse)
        assert [(t.topic_name, [p.error_code for p in t.partitions]) for t in r.responses] == [("admin-t", [0])]
    assert start_offsets(broker, "adm", "admin-t") == {0: 2}
    R = DescribeShareGroupOffsetsRequest
    with wire(broker) as w:
        r = w.request(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id="adm", topics=None)]), 1,
                      DescribeShareGroupOffsetsResponse)
    assert [p.lag for t in r.groups[0].topics for p in t.partitions] == [3]  # 5 records, from offset 2
    D = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    with wire(broker) as w:
        r = w.request(DeleteShareGroupOffsetsRequest(group_id="adm", topics=[D(topic_name="admin-t")]), 0,
                      DeleteShareGroupOffsetsResponse)
        assert [(t.topic_name, t.error_code) for t in r.responses] == [("admin-t", 0)]
    assert start_offsets(broker, "adm", "admin-t") == {}


def test_a_share_groups_configs_are_set_described_and_kept_across_a_restart(tmp_path):
    data = tmp_path / "data"
    with EmbeddedBroker(data, config=CONFIG) as b:
        bs = b.bootstrap_servers
        set_group_configs(bs, "tuned", {"share.record.lock.duration.ms": "15000",
                                        "share.isolation.level": "read_committed",
                                        "consumer.session.timeout.ms": "50000"})
        admin = AdminClient({"bootstrap.servers": bs})
        bad = ConfigResource(ResourceType.GROUP, "tuned", incremental_configs=[
            ConfigEntry("share.lock.forever", "1", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException, match="Unknown group config name: share.lock.forever"):
            admin.incremental_alter_configs([bad])[bad].result(15)
    with EmbeddedBroker(data, config=CONFIG) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        res = ConfigResource(ResourceType.GROUP, "tuned")
        entries = admin.describe_configs([res])[res].result(15)
        assert entries["share.record.lock.duration.ms"].value == "15000"
        assert entries["share.isolation.level"].value == "read_committed"
        assert entries["consumer.session.timeout.ms"].value == "50000"  # a KIP-848 group config, kept alike
        assert b.broker.context.groups.group_configs["tuned"]["consumer.session.timeout.ms"] == "50000"
        assert entries["share.delivery.count.limit"].value == "3"  # the broker's group.share.delivery.count.limit
        assert entries["share.delivery.count.limit"].is_default
        assert entries["share.auto.offset.reset"].value == "latest"  # Kafka's default


@pytest.mark.parametrize("records,max_bytes", [(0, 1 << 20), (5, 0)], ids=["empty-topic", "max-bytes-0"])
def test_a_partition_answered_without_records_carries_empty_records_not_null(broker, records, max_bytes):
    """librdkafka refuses a null Records field in ShareFetch (Kafka always sends an empty record set); a fetch
    with MaxBytes 0 acquires nothing (librdkafka's fetch.max.bytes=0)."""
    bs = broker.bootstrap_servers
    create_topic(bs, "quiet")
    produce(bs, "quiet", records)
    set_group_configs(bs, "q", {"share.auto.offset.reset": "earliest"})
    with wire(broker) as w:
        hb = w.request(ShareGroupHeartbeatRequest(group_id="q", member_id="m-q", member_epoch=0, rack_id=None,
                                                  subscribed_topic_names=["quiet"]), 1, ShareGroupHeartbeatResponse)
        deadline = time.monotonic() + DEADLINE_S
        while not (hb.assignment and hb.assignment.topic_partitions):  # assigned once its share state exists
            assert time.monotonic() < deadline, "no assignment"
            time.sleep(0.1)
            hb = w.request(ShareGroupHeartbeatRequest(group_id="q", member_id="m-q", member_epoch=hb.member_epoch,
                                                      rack_id=None, subscribed_topic_names=None), 1,
                           ShareGroupHeartbeatResponse)
        [tp] = hb.assignment.topic_partitions
        F = ShareFetchRequest.FetchTopic
        r = w.request(ShareFetchRequest(group_id="q", member_id="m-q", share_session_epoch=0, max_wait_ms=0,
                                        min_bytes=1, max_bytes=max_bytes, max_records=10, batch_size=10,
                                        topics=[F(topic_id=tp.topic_id, partitions=[F.FetchPartition(
                                            partition_index=0, acknowledgement_batches=[])])],
                                        forgotten_topics_data=[]), 1, ShareFetchResponse)
    [part] = [p for t in r.responses for p in t.partitions]
    assert (part.error_code, part.records, part.acquired_records) == (0, b"", [])


def consume_all(c: ShareConsumer, topic: str, want: int) -> dict[tuple[int, int], tuple[bytes, int]]:
    """(partition, offset) -> (value, delivery count) of ``topic``'s records, each acknowledged, until ``want``
    arrived or DEADLINE_S passed."""
    got: dict[tuple[int, int], tuple[bytes, int]] = {}
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < want and time.monotonic() < deadline:
        for m in poll_values(c):
            if m.topic() == topic:
                got[(m.partition(), m.offset())] = (m.value(), m.delivery_count())
            c.acknowledge(m)
        c.commit_sync(10)
    return got


def share_state(bs: str, group: str) -> dict[ShareStateKey, bool]:
    """What ``__share_group_state`` holds for ``group``: each share-partition's key -> whether its last record is
    live (False: a tombstone)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "state-reader", "enable.auto.commit": False})
    out: dict[ShareStateKey, bool] = {}
    try:
        partitions = c.list_topics(SHARE_STATE_TOPIC, timeout=10).topics[SHARE_STATE_TOPIC].partitions
        ends = {p: c.get_watermark_offsets(TopicPartition(SHARE_STATE_TOPIC, p), timeout=10)[1] for p in partitions}
        c.assign([TopicPartition(SHARE_STATE_TOPIC, p, 0) for p, end in ends.items() if end > 0])
        read = {p: 0 for p in ends}
        deadline = time.monotonic() + DEADLINE_S
        while any(read[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            read[m.partition()] = m.offset() + 1
            key = decode_state_key(m.key())
            if key.group_id == group:
                out[key] = m.value() is not None
    finally:
        c.close()
    return out


def test_a_recreated_topic_starts_with_fresh_share_state(broker):
    """librdkafka's 0184: share-partition state belongs to a topic id, so a topic deleted and created again under
    the same name is delivered from offset 0, every record once, while the consumer stays subscribed."""
    bs = broker.bootstrap_servers
    create_topic(bs, "again", partitions=3)
    c = share_consumer(bs, "recreators", **{"share.acknowledgement.mode": "explicit",
                                            "topic.metadata.refresh.interval.ms": "500"})
    admin = AdminClient({"bootstrap.servers": bs})
    try:
        c.subscribe(["again"])
        for p in range(3):
            produce(bs, "again", 10, tag=f"old{p}", partition=p)
        assert len(consume_all(c, "again", 30)) == 30
        assert start_offsets(broker, "recreators", "again") == {0: 10, 1: 10, 2: 10}
        old = share_state(bs, "recreators")
        assert sorted(k.partition for k in old) == [0, 1, 2] and all(old.values())
        admin.delete_topics(["again"], operation_timeout=15)["again"].result(15)
        assert start_offsets(broker, "recreators", "again") == {}  # Kafka deletes a deleted topic's share state
        deadline = time.monotonic() + DEADLINE_S
        while any(share_state(bs, "recreators").values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert share_state(bs, "recreators") == dict.fromkeys(old, False)  # tombstones: compaction removes it
        create_topic(bs, "again", partitions=2)
        for p in range(2):
            produce(bs, "again", 10, tag=f"new{p}", partition=p)
        got = consume_all(c, "again", 20)
    finally:
        c.close()
    assert sorted(got) == [(p, o) for p in range(2) for o in range(10)]
    assert {v for v, _n in got.values()} == {f"new{p}-{i:05d}".encode() for p in range(2) for i in range(10)}
    assert {n for _v, n in got.values()} == {1}
    assert start_offsets(broker, "recreators", "again") == {0: 10, 1: 10}
    new = {k: live for k, live in share_state(bs, "recreators").items() if k not in old}
    assert sorted(k.partition for k in new) == [0, 1] and all(new.values())


def wait_for_assignment(b: EmbeddedBroker, group: str, members: int) -> list[set[int]]:
    """Wait until ``group`` has ``members`` members, each at the group's epoch (it heard its assignment) and
    assigned something; the partitions of each."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with wire(b) as w:
            [g] = w.request(ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1,
                            ShareGroupDescribeResponse).groups
        assigned = [{p for tp in m.assignment.topic_partitions for p in tp.partitions} for m in g.members]
        if len(g.members) == members and all(m.member_epoch == g.group_epoch for m in g.members) and all(assigned):
            return assigned
        assert time.monotonic() < deadline, f"share group {group}: {len(g.members)} members, epoch {g.group_epoch}"
        time.sleep(0.1)


def test_an_implicit_and_an_explicit_consumer_split_a_groups_partitions(broker):
    """librdkafka's 0172 (mixed acknowledgement modes): Kafka's simple assignor balances a share group's partitions
    over its members, so of two consumers of a 4-partition topic each reads its own two, even when the first to
    poll could take every record at once."""
    bs = broker.bootstrap_servers
    create_topic(bs, "mixed", partitions=4)
    for p in range(4):
        produce(bs, "mixed", 100, tag=f"p{p}", partition=p)
    implicit = share_consumer(bs, "mixed-modes")
    explicit = share_consumer(bs, "mixed-modes", **{"share.acknowledgement.mode": "explicit"})
    got: dict[str, list[tuple[int, int]]] = {"implicit": [], "explicit": []}
    try:
        implicit.subscribe(["mixed"])
        explicit.subscribe(["mixed"])
        assert sorted(map(sorted, wait_for_assignment(broker, "mixed-modes", 2))) in (  # each told its two
            [[0, 1], [2, 3]], [[0, 2], [1, 3]], [[0, 3], [1, 2]])
        deadline = time.monotonic() + DEADLINE_S
        while sum(map(len, got.values())) < 400 and time.monotonic() < deadline:
            got["implicit"] += [(m.partition(), m.offset()) for m in poll_values(implicit)]
            for m in poll_values(explicit):
                got["explicit"].append((m.partition(), m.offset()))
                explicit.acknowledge(m)
            explicit.commit_sync(10)
        poll_values(implicit)  # its last records are accepted by this poll
    finally:
        implicit.close()
        explicit.close()
    delivered = got["implicit"] + got["explicit"]
    assert sorted(delivered) == [(p, o) for p in range(4) for o in range(100)]  # each record once
    assert {p for p, _o in got["implicit"]}.isdisjoint({p for p, _o in got["explicit"]})
    assert len(got["implicit"]) == len(got["explicit"]) == 200


def first_two_batches(c: ShareConsumer, acknowledge_first: bool) -> tuple[list, list]:
    """librdkafka's 0179 loop: poll until two non-empty batches came (the first acknowledged in full at once when
    ``acknowledge_first``, so the next fetch carries the acknowledgements)."""
    batches: list[list] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(batches) < 2 and time.monotonic() < deadline:
        batch = poll_values(c, 3)
        if batch:
            batches.append(batch)
            if acknowledge_first and len(batches) == 1:
                for m in batch:
                    c.acknowledge(m)
    assert len(batches) == 2, batches
    return batches[0], batches[1]


def one_partition(batch: list) -> int:
    """The partition of a batch holding exactly one partition's 50 records (else the assertion fails)."""
    assert len({m.partition() for m in batch}) == 1, sorted((m.partition(), m.offset()) for m in batch)
    partition = batch[0].partition()
    assert sorted(m.offset() for m in batch) == list(range(50))
    return partition


def committed_receipts(c: ShareConsumer) -> tuple[dict[int, set[int]], list]:
    receipts: dict[int, set[int]] = {}
    failures: list = []

    def committed(offsets, exc):
        if exc is not None:
            failures.append(exc)
        for tp, acked in offsets.items():
            receipts.setdefault(tp.partition, set()).update(acked)
    c.set_acknowledgement_commit_callback(committed)
    return receipts, failures


def test_acknowledgements_pending_at_close_are_committed_and_the_unacknowledged_released(broker):
    """librdkafka's 0179 (destroy with explicit acknowledgements, half of the second batch acknowledged): a fresh
    group's first fetches answer one partition each, as Kafka's leader does while it loads each share-partition's
    state; what the consumer acknowledged but had not sent is committed by its close (the commit callback hears
    each partition's offsets, without error), and what it had not acknowledged goes back to the group for another
    consumer, a second delivery."""
    bs = broker.bootstrap_servers
    create_topic(bs, "closing", partitions=2)
    for p in range(2):
        produce(bs, "closing", 50, partition=p)
    c = share_consumer(bs, "closers", **{"share.acknowledgement.mode": "explicit"})
    receipts, failures = committed_receipts(c)
    c.subscribe(["closing"])
    first, second = first_two_batches(c, acknowledge_first=True)
    first_partition, second_partition = one_partition(first), one_partition(second)
    assert {first_partition, second_partition} == {0, 1}
    for m in second:
        if m.offset() < 25:
            c.acknowledge(m)
    c.close()
    assert failures == []
    assert receipts == {first_partition: set(range(50)), second_partition: set(range(25))}
    assert start_offsets(broker, "closers", "closing") == {first_partition: 50, second_partition: 25}
    after = share_consumer(bs, "closers", **{"share.acknowledgement.mode": "explicit"})
    try:
        after.subscribe(["closing"])
        got = consume_all(after, "closing", 25)
    finally:
        after.close()
    assert got == {(second_partition, o): (f"v-{o:05d}".encode(), 2) for o in range(25, 50)}


def test_an_implicit_consumer_closed_after_two_batches_commits_only_the_first(broker):
    """librdkafka's 0179 (destroy with implicit acknowledgements): one partition's records per fetch of a fresh
    group; the second poll acknowledges the first batch, and the close leaves the second batch unacknowledged."""
    bs = broker.bootstrap_servers
    create_topic(bs, "implicit-closing", partitions=2)
    for p in range(2):
        produce(bs, "implicit-closing", 50, partition=p)
    c = share_consumer(bs, "implicit-closers")
    receipts, failures = committed_receipts(c)
    c.subscribe(["implicit-closing"])
    first, second = first_two_batches(c, acknowledge_first=False)
    first_partition, second_partition = one_partition(first), one_partition(second)
    assert {first_partition, second_partition} == {0, 1}
    c.close()
    assert failures == []
    assert receipts == {first_partition: set(range(50))}
    assert start_offsets(broker, "implicit-closers", "implicit-closing")[first_partition] == 50
