"""Helpers of the cluster tests: a real ZooKeeper (the Debian package's jars) and real broker processes
on free 127.0.0.1 ports (``LocalCluster``), each stopped by its own pid; ``wait_until`` for the
cluster's asynchronous changes."""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import pytest
from kazoo.client import KazooClient

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from tidelake.cluster.local_cluster import BrokerProcess, LocalCluster
from tidelake.log import LogConfig, PartitionLog
from tidelake.protocol.wire_client import WireClient
from tidelake.cluster.zookeeper_server import ZooKeeperNotInstalled, classpath

T = TypeVar("T")
TXN_STATE_PARTITIONS = 3  # __transaction_state's partitions in a transaction cluster (``txn_cluster``)


def require_zookeeper() -> None:
    try:
        classpath()
    except ZooKeeperNotInstalled as e:  # a missing system package is a failure, not a skip
        pytest.fail(f"{e} (make test installs it when run as root)")


def wait_until(what: str, check: Callable[[], T], timeout_s: float = 30.0, interval_s: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # the cluster may be mid-change: keep asking
            last_error = e
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


def start_cluster(root, brokers: int = 3, *, metrics: bool = False, log_level: str = "INFO",
                  **configs: str) -> LocalCluster:
    """A started cluster whose brokers all know the controller and each other. Tried a second time, on fresh
    ports and directories, when the first does not come up: free ports are picked before the brokers bind them,
    and another process (the other test worker) can take one in between; the first failure is printed."""
    try:
        return _start_cluster(Path(root), brokers, metrics=metrics, log_level=log_level, **configs)
    except (AssertionError, RuntimeError, TimeoutError) as first:
        print(f"cluster start failed once, starting it again on fresh ports: {first}")
        return _start_cluster(Path(f"{root}-again"), brokers, metrics=metrics, log_level=log_level, **configs)


def _start_cluster(root: Path, brokers: int, *, metrics: bool, log_level: str, **configs: str) -> LocalCluster:
    require_zookeeper()
    # a small offsets topic: every consumer with a group.id makes the cluster create it
    settings = {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "4000",
                "offsets.topic.num.partitions": "3", **configs}
    cluster = LocalCluster(root, brokers, configs=settings, metrics=metrics, log_level=log_level)
    cluster.start()
    try:
        # (generous: on a loaded 2-core machine three Python brokers and a JVM take a while to start)
        wait_until("every broker registered in ZooKeeper", lambda: len(registered(cluster)) == brokers, 90)
        wait_until("every broker to know the controller and all brokers", lambda: all(
            md.controller_id > 0 and len(md.brokers) == brokers for md in map(metadata, cluster.brokers.values())),
            90)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def metadata(broker: BrokerProcess, topics: list[str] | None = None):
    """One Metadata v9 answer of ``broker`` (no auto-creation)."""
    req = MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                               for t in topics], allow_auto_topic_creation=False)
    with WireClient("127.0.0.1", broker.port) as c:
        return c.request(req, 9)


@contextmanager
def zookeeper_client(cluster: LocalCluster) -> Iterator[KazooClient]:
    """A kazoo client of the cluster's ZooKeeper, stopped and closed on exit."""
    client = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    client.start(10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def registered(cluster: LocalCluster) -> list[str]:
    with zookeeper_client(cluster) as client:
        return client.get_children("/brokers/ids")


def create_topic(cluster, name: str, partitions: int, rf: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics([NewTopic(name, partitions, rf, config=configs)], request_timeout=20).values():
        f.result(30)
    wait_until(f"every broker to know the leaders of {name}", lambda: all(
        len(md.topics[0].partitions) == partitions and all(p.leader_id > 0 for p in md.topics[0].partitions)
        for md in (metadata(b, [name]) for b in cluster.brokers.values())))


def produce(cluster, topic: str, n: int, *, idempotent: bool = True, prefix: bytes = b"r") -> dict:
    """Produce ``n`` records acks=all; returns {(partition, offset): value} of the acknowledged ones."""
    acked: dict[tuple[int, int], bytes] = {}
    errors = []

    def on_delivery(err, m):
        if err is None:
            acked[(m.partition(), m.offset())] = m.value()
        else:
            errors.append(err)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": idempotent,
                  "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=b"k%d" % (i % 17), value=prefix + b"-%06d" % i, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    return acked


def consume_all(cluster, topic: str, partitions: int, expected: int, timeout_s: float = 60) -> list:
    """Every record of the topic from the start (assign(), no group), as (partition, offset, value)."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    try:
        wait_until(f"{expected} records from {topic}",
                   lambda: out.extend((m.partition(), m.offset(), m.value())
                                      for m in c.consume(500, 0.5) if m.error() is None) or len(out) >= expected,
                   timeout_s)
    finally:
        c.close()
    return out


def replica_batches(cluster, broker_id: int, topic: str, partition: int) -> list[tuple[int, int, int, bytes]]:
    """(base offset, last offset, partition leader epoch, batch bytes) of one replica's log, read from
    its data directory once the broker is stopped."""
    plog = PartitionLog.open(cluster.brokers[broker_id].data_dir / f"{topic}-{partition}", LogConfig())
    try:
        return [(h.base_offset, h.last_offset, h.partition_leader_epoch, bytes(data))
                for h, data in plog.iter_batches(0)]
    finally:
        plog.close()


def find_coordinator(cluster, key_type: int, key: str, timeout_s: float = 60) -> int:
    """The coordinator's broker id for a group (key type 0) or a transactional id (1), asked until one is
    named (the first FindCoordinator creates the internal topic)."""
    def ask():
        with WireClient("127.0.0.1", next(b for b in cluster.brokers.values() if b.alive()).port) as c:
            r = c.request(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 4)
        (coordinator,) = r.coordinators
        return coordinator.node_id if coordinator.error_code == 0 else None
    return wait_until(f"a coordinator for {key}", ask, timeout_s)
