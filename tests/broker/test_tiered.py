"""Tiered storage through a broker, on a real S3 server (moto's): a broker whose disk holds one segment
serves a consumer the whole history from the object store, the same records at the same offsets;
ListOffsets earliest (-2), earliest-local (-4), latest-tiered (-5), earliest-pending-upload (-6) and by
timestamp below the local log start (from the remote segments' time indexes) as Kafka answers them."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from kafka.protocol.consumer import ListOffsetsRequest

from clients import poll_messages
from tidelake.broker import EmbeddedBroker
from tidelake.protocol.wire_client import WireClient

WAIT_S = 120  # bound on waiting for the remote log manager's passes (never reached when it works)


def tiered_broker_config(s3_server, url: str) -> dict[str, str]:
    return {"remote.log.storage.system.enable": "true", "remote.log.storage.url": url,
            **{f"remote.log.storage.{k}": v for k, v in s3_server.options.items()},
            "remote.log.manager.task.interval.ms": "200"}


def list_offsets(bootstrap: str, topic: str, timestamp: int, version: int = 9):
    """(error code, timestamp, offset, leader epoch) of one ListOffsets of partition 0."""
    with WireClient.connect(bootstrap) as c:
        r = c.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]),
            version)
    p = r.topics[0].partitions[0]
    return p.error_code, p.timestamp, p.offset, p.leader_epoch


def list_offset(bootstrap: str, topic: str, timestamp: int) -> int:
    error, _ts, offset, _epoch = list_offsets(bootstrap, topic, timestamp)
    assert error == 0
    return offset


def wait_until(condition, what: str, state=lambda: "") -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what} {state()}"
        time.sleep(0.1)


def test_a_broker_with_one_local_segment_serves_fifty_segments_of_history(tmp_path, s3_server):
    config = tiered_broker_config(s3_server, s3_server.url("tiered-broker"))
    with EmbeddedBroker(tmp_path, config=config) as b:
        b.run(b.broker.create_topic, "history", 1, {"remote.storage.enable": "true", "segment.bytes": "8192",
                                                     "local.retention.bytes": "0"})
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5, "batch.size": 4096})
        sent = {}
        for i in range(4000):
            key, value = b"k%d" % (i % 31), b"value-%06d-" % i + b"x" * 80
            p.produce("history", key=key, value=value, partition=0)
            sent[i] = (key, value)
        assert p.flush(30) == 0
        plog = b.broker.logs.get("history", 0)
        remote = b.broker.logs.remote
        wait_until(lambda: len(plog.segments) == 1 and remote.metadata("history", 0) is not None
                   and remote.metadata("history", 0).end_offset == plog.segments[0].base_offset,
                   "every closed segment copied and deleted locally")
        assert len(remote.metadata("history", 0).segments) >= 50
        assert plog.log_start_offset == 0 < plog.local_log_start_offset
        assert list_offset(b.bootstrap_servers, "history", -2) == 0
        assert list_offset(b.bootstrap_servers, "history", -4) == plog.local_log_start_offset
        got = poll_messages(b.bootstrap_servers, "history", [0], 4000, timeout=WAIT_S)
        assert {m.offset(): (m.key(), m.value()) for m in got} == sent
        assert len(got) == 4000
        committed = poll_messages(b.bootstrap_servers, "history", [0], 4000, timeout=WAIT_S,
                                  extra={"isolation.level": "read_committed"})   # as the pipeline reads
        assert {m.offset(): (m.key(), m.value()) for m in committed} == sent


def test_list_offsets_by_timestamp_and_latest_tiered_read_the_remote_segments(tmp_path, s3_server):
    config = tiered_broker_config(s3_server, s3_server.url("tiered-list-offsets"))
    with EmbeddedBroker(tmp_path, config=config) as b:
        b.run(b.broker.create_topic, "dated", 1, {"remote.storage.enable": "true", "segment.bytes": "2048",
                                                   "local.retention.bytes": "0"})
        b.run(b.broker.create_topic, "plain", 1, {})
        assert list_offsets(b.bootstrap_servers, "plain", -5) == (0, -1, -1, -1)   # nothing tiered: -1
        assert list_offsets(b.bootstrap_servers, "plain", -6, version=11) == (0, -1, -1, -1)
        assert list_offsets(b.bootstrap_servers, "dated", -6, version=11)[:3] == (0, -1, 0)   # nothing copied yet
        t0 = int(time.time() * 1000) - 3_600_000   # an hour ago: well within retention.ms
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0, "batch.size": 512})
        for i in range(200):   # record i at t0 + 10 * i
            p.produce("dated", value=b"v%04d" % i + b"x" * 60, partition=0, timestamp=t0 + 10 * i)
        assert p.flush(30) == 0
        plog = b.broker.logs.get("dated", 0)
        remote = b.broker.logs.remote
        wait_until(lambda: len(plog.segments) == 1 and remote.metadata("dated", 0) is not None
                   and remote.metadata("dated", 0).end_offset == plog.segments[0].base_offset,
                   "every closed segment copied and deleted locally",
                   lambda: f"{[(s.base_offset, s.size) for s in plog.segments]} {remote.metadata('dated', 0)}")
        local_start = plog.local_log_start_offset
        assert local_start > 100
        for k in (0, 7, 55, local_start - 1):   # below the local log start: only the store holds them
            assert list_offsets(b.bootstrap_servers, "dated", t0 + 10 * k - 5)[:3] == (0, t0 + 10 * k, k)
        assert list_offsets(b.bootstrap_servers, "dated", t0 + 10 * local_start)[:3] == (0, t0 + 10 * local_start,
                                                                                         local_start)
        assert list_offsets(b.bootstrap_servers, "dated", t0 + 10 * 200)[:3] == (0, -1, -1)
        # KIP-1005: the highest offset copied, from version 9 on (Kafka: UNSUPPORTED_VERSION before)
        assert list_offsets(b.bootstrap_servers, "dated", -5) == (0, -1, local_start - 1, 0)
        assert list_offsets(b.bootstrap_servers, "dated", -5, version=8)[0] == 35
        # KIP-1023: the first offset not copied yet, from version 11 on
        assert list_offsets(b.bootstrap_servers, "dated", -6, version=11) == (0, -1, local_start, 0)
        assert list_offsets(b.bootstrap_servers, "dated", -6, version=10)[0] == 35
        assert list_offsets(b.bootstrap_servers, "dated", -4, version=7)[0] == 35


def test_turning_remote_storage_off_needs_delete_on_disable_as_kafka(tmp_path, s3_server):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    config = tiered_broker_config(s3_server, s3_server.url("tiered-off"))
    with EmbeddedBroker(tmp_path, config=config) as b:
        b.run(b.broker.create_topic, "tiered", 1, {"remote.storage.enable": "true"})
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})

        def set_configs(**configs) -> None:
            res = ConfigResource("topic", "tiered", incremental_configs=[
                ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
                for k, v in configs.items()])
            admin.incremental_alter_configs([res])[res].result(30)
        with pytest.raises(KafkaException, match="invalid to disable remote storage without deleting remote data"):
            set_configs(remote_storage_enable="false")
        assert b.broker.logs.get("tiered", 0).config.remote_storage_enable
        set_configs(remote_log_copy_disable="true")   # read only: allowed
        set_configs(remote_storage_enable="false", remote_log_delete_on_disable="true")
        assert not b.broker.logs.get("tiered", 0).config.remote_storage_enable


def test_remote_storage_enable_is_refused_on_a_broker_without_tiered_storage(tmp_path):
    from tidelake.errors import InvalidConfig
    with EmbeddedBroker(tmp_path) as b:
        with pytest.raises(InvalidConfig, match="Tiered Storage functionality is disabled"):
            b.run(b.broker.create_topic, "t", 1, {"remote.storage.enable": "true"})
