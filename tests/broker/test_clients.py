"""Real clients (confluent-kafka / librdkafka and kafka-python) against an EmbeddedBroker."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, NewTopic)

from clients import poll_messages
from tidelake.broker import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("clients"), config={"num.partitions": "3"}) as b:
        yield b


def consume_all(bootstrap, topic, partitions, expected, *, isolation="read_uncommitted", timeout=30):
    return poll_messages(bootstrap, topic, partitions, expected, timeout=timeout,
                         extra={"isolation.level": isolation})


def produce(bootstrap, topic, n, **conf):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    acks = []
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"value-%d" % i, headers=[("h", b"%d" % i)],
                  on_delivery=lambda err, m: acks.append((err, m.partition(), m.offset())))
        p.poll(0)
    assert p.flush(30) == 0
    return acks


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_round_trip_each_acks(broker, acks):
    topic = f"rt-acks-{acks}"
    sent = produce(broker.bootstrap_servers, topic, 500, acks=acks)  # auto-created (3 partitions)
    assert len(sent) == 500 and all(err is None for err, _, _ in sent)
    got = consume_all(broker.bootstrap_servers, topic, range(3), 500)
    assert sorted(m.value() for m in got) == sorted(b"value-%d" % i for i in range(500))
    # keyed records: same key -> same partition; per-partition offsets are dense from 0
    by_part = {}
    for m in got:
        by_part.setdefault(m.partition(), []).append(m.offset())
        assert m.headers() == [("h", m.key()[1:])]
    assert len(by_part) == 3
    assert all(offs == list(range(len(offs))) for offs in by_part.values())
    if acks != "0":
        assert sorted((p, o) for _, p, o in sent) == sorted((m.partition(), m.offset()) for m in got)


def test_confluent_idempotent_producer(broker):
    sent = produce(broker.bootstrap_servers, "idem-cf", 2000, **{"enable.idempotence": True, "acks": "all"})
    assert all(err is None for err, _, _ in sent)
    got = consume_all(broker.bootstrap_servers, "idem-cf", range(3), 2000)
    assert len(got) == 2000 and len({m.value() for m in got}) == 2000


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_confluent_compressed_batches(broker, codec):
    produce(broker.bootstrap_servers, f"comp-{codec}", 300, **{"compression.type": codec})
    got = consume_all(broker.bootstrap_servers, f"comp-{codec}", range(3), 300)
    assert sorted(m.value() for m in got) == sorted(b"value-%d" % i for i in range(300))


def test_confluent_admin_lifecycle(broker):
    a = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    a.create_topics([NewTopic("adm-cf", 2, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"})])[
        "adm-cf"].result(10)
    with pytest.raises(KafkaException) as e:
        a.create_topics([NewTopic("adm-cf", 2, 1)])["adm-cf"].result(10)
    assert e.value.args[0].code() == 36  # TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as e:
        a.create_topics([NewTopic("adm-rf3", 1, 3)])["adm-rf3"].result(10)
    assert e.value.args[0].code() == 38  # INVALID_REPLICATION_FACTOR
    res = ConfigResource("topic", "adm-cf")
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "3600000" and not cfg["retention.ms"].is_default
    assert cfg["segment.bytes"].is_default and cfg["cleanup.policy"].value == "compact"
    # incremental alter: SET one, DELETE another (back to default)
    inc = ConfigResource("topic", "adm-cf", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])
    a.incremental_alter_configs([inc])[inc].result(10)
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "1000" and cfg["cleanup.policy"].value == "delete"
    assert cfg["cleanup.policy"].is_default
    # legacy alter replaces the whole set of overrides
    alt = ConfigResource("topic", "adm-cf", set_config={"segment.ms": "60000"})
    a.alter_configs([alt])[alt].result(10)
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["segment.ms"].value == "60000" and cfg["retention.ms"].is_default
    a.create_partitions([NewPartitions("adm-cf", 5)])["adm-cf"].result(10)
    assert len(a.list_topics("adm-cf", timeout=10).topics["adm-cf"].partitions) == 5
    with pytest.raises(KafkaException) as e:
        a.create_partitions([NewPartitions("adm-cf", 3)])["adm-cf"].result(10)
    assert e.value.args[0].code() == 37  # INVALID_PARTITIONS: never reduce
    a.delete_topics(["adm-cf"])["adm-cf"].result(10)
    assert "adm-cf" not in a.list_topics(timeout=10).topics
    assert broker.broker.logs.get("adm-cf", 0) is None


def test_confluent_offsets_for_times_and_watermarks(broker):
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i, ts in enumerate([10_000, 20_000, 30_000, 40_000]):
        p.produce("ts-cf", partition=0, value=b"%d" % i, timestamp=ts)
        p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    try:
        res = c.offsets_for_times([TopicPartition("ts-cf", 0, 25_000)], timeout=10)
        assert res[0].offset == 2
        res = c.offsets_for_times([TopicPartition("ts-cf", 0, 50_000)], timeout=10)
        assert res[0].offset == -1  # no record at or after: end
        assert c.get_watermark_offsets(TopicPartition("ts-cf", 0), timeout=10) == (0, 4)
    finally:
        c.close()


def test_delete_records_moves_log_start(broker):
    produce(broker.bootstrap_servers, "delrec", 30)
    a = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    hw = {p: broker.broker.logs.get("delrec", p).high_watermark for p in range(3)}
    target = max(hw, key=hw.get)
    fut = a.delete_records([TopicPartition("delrec", target, 2)])
    result = list(fut.values())[0].result(10)
    assert result.low_watermark == 2
    assert broker.broker.logs.get("delrec", target).log_start_offset == 2


def test_kafka_python_round_trip_admin_and_times(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType, NewTopic as KNewTopic
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([KNewTopic("kp-topic", 2, 1)])
        prod = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", enable_idempotence=True)
        futs = [prod.send("kp-topic", key=b"key", value=b"v%d" % i, timestamp_ms=1_000_000 + i) for i in range(200)]
        prod.flush(30)
        metas = [f.get(10) for f in futs]
        prod.close()
        part = metas[0].partition
        assert [m.offset for m in metas] == list(range(200)) and {m.partition for m in metas} == {part}
        cons = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
        from kafka import TopicPartition as KTP
        tp = KTP("kp-topic", part)
        cons.assign([tp])
        values = [m.value for m in cons]
        assert values == [b"v%d" % i for i in range(200)]
        assert cons.offsets_for_times({tp: 1_000_150})[tp].offset == 150
        assert cons.beginning_offsets([tp])[tp] == 0 and cons.end_offsets([tp])[tp] == 200
        cons.close()
        from kafka.admin._configs import ConfigFilterType
        node = str(broker.broker.context.node_id)
        cfg = admin.describe_configs([KConfigResource(ConfigResourceType.BROKER, node)],
                                     config_filter=ConfigFilterType.ALL)["broker"][node]
        assert cfg["num.partitions"]["value"] == "3"
        assert cfg["num.partitions"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert cfg["log.segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    finally:
        admin.close()


def test_confluent_keyless_records_on_a_compacted_topic_fail_exactly_those(broker):
    """KIP-467: the batch is rejected with INVALID_RECORD and record_errors naming the keyless
    records, so librdkafka fails those with INVALID_RECORD and the rest of the batch with
    _INVALID_DIFFERENT_RECORD; nothing is appended, and keyed records then go through."""
    bs = broker.bootstrap_servers
    broker.run(broker.broker.create_topic, "compacted-keys", 1, {"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": bs, "linger.ms": 200})
    results = {}
    for i in range(6):
        p.produce("compacted-keys", key=None if i in (1, 4) else b"k%d" % i, value=b"v%d" % i, partition=0,
                  on_delivery=lambda err, m, i=i: results.__setitem__(i, err.code() if err else None))
    assert p.flush(30) == 0
    assert results == {0: KafkaError._INVALID_DIFFERENT_RECORD, 1: KafkaError.INVALID_RECORD,
                       2: KafkaError._INVALID_DIFFERENT_RECORD, 3: KafkaError._INVALID_DIFFERENT_RECORD,
                       4: KafkaError.INVALID_RECORD, 5: KafkaError._INVALID_DIFFERENT_RECORD}
    assert broker.broker.logs.get("compacted-keys", 0).log_end_offset == 0
    acks = []
    p.produce("compacted-keys", key=b"k", value=b"v", partition=0, on_delivery=lambda err, m: acks.append(err))
    assert p.flush(30) == 0 and acks == [None]


def test_confluent_alter_configs_accepts_what_kafka_accepts(broker):
    """Topic configs Kafka 3.9 knows, deprecated ones clients still send included, and broker configs
    such as the SASL/Kerberos ones (dynamic in Kafka) are accepted and described; Kafka's refusals
    stay refusals: an unknown topic config, a bad value, tiered storage without it, a static broker
    config."""
    a = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    a.create_topics([NewTopic("cfg-kafka-names", 1, 1)])["cfg-kafka-names"].result(30)

    def alter(kind, name, **values):
        res = ConfigResource(kind, name, incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in values.items()])
        try:
            a.incremental_alter_configs([res])[res].result(30)
            return None
        except KafkaException as e:
            return e.args[0].code()

    def described(kind, name, *keys):
        res = ConfigResource(kind, name)
        got = a.describe_configs([res])[res].result(30)
        return {k: got[k].value for k in keys}
    assert alter("topic", "cfg-kafka-names", message_format_version="0.10.2",
                 message_timestamp_difference_max_ms="3600000", compression_zstd_level="7",
                 leader_replication_throttled_replicas="*") is None
    assert described("topic", "cfg-kafka-names", "message.format.version", "compression.zstd.level") == {
        "message.format.version": "0.10.2", "compression.zstd.level": "7"}
    assert alter("topic", "cfg-kafka-names", no_such_config="1") == KafkaError.INVALID_CONFIG
    assert alter("topic", "cfg-kafka-names", message_format_version="banana") == KafkaError.INVALID_CONFIG
    assert alter("topic", "cfg-kafka-names", remote_storage_enable="true") == KafkaError.INVALID_CONFIG
    node = str(broker.broker.context.node_id)
    assert alter("broker", node, sasl_kerberos_min_time_before_relogin="30000") is None
    assert described("broker", node, "sasl.kerberos.min.time.before.relogin") == {
        "sasl.kerberos.min.time.before.relogin": "30000"}
    assert alter("broker", node, sasl_kerberos_min_time_before_relogin="soon") == KafkaError.INVALID_CONFIG
    assert alter("broker", node, process_roles="broker") == KafkaError.INVALID_CONFIG


def test_confluent_deprecated_configs_accepted_and_ignored_as_kafka_3(broker):
    """librdkafka's 0092: half the records are written, the topic's ``message.format.version`` is set
    to 0.10.0.0 by a (non-incremental) AlterConfigs of the described dynamic configs plus that one,
    the rest are written and all are read back: Kafka 3.x accepts every version string its
    MetadataVersion parses (0.10.0.0 is 0.10.0) and ignores it. Every config Kafka 3.9 deprecates is
    listed by DescribeConfigs, topic and broker, with Kafka's default."""
    bs = broker.bootstrap_servers
    topic = "msgver-0092"
    a = AdminClient({"bootstrap.servers": bs})
    a.create_topics([NewTopic(topic, 1, 1)])["msgver-0092"].result(30)
    p = Producer({"bootstrap.servers": bs})
    acks = []
    for i in range(60):
        p.produce(topic, value=b"m%d" % i, partition=0, on_delivery=lambda err, m: acks.append(err))
        assert p.flush(30) == 0  # one message per batch, as 0092
        if i == 30:
            res = ConfigResource("topic", topic)
            described = a.describe_configs([res])[res].result(30)
            kept = {e.name: e.value for e in described.values()
                    if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
            res = ConfigResource("topic", topic, set_config={**kept, "message.format.version": "0.10.0.0"})
            a.alter_configs([res])[res].result(30)
    assert acks == [None] * 60
    got = consume_all(bs, topic, [0], 60)
    assert [m.value() for m in got] == [b"m%d" % i for i in range(60)]

    def described(kind, name):
        res = ConfigResource(kind, name)
        return {k: e.value for k, e in a.describe_configs([res])[res].result(30).items()}
    assert described("topic", topic)["message.format.version"] == "0.10.0.0"
    for version in ("0.8.2", "0.11.0-IV2", "2.8.1", "3.0-IV1", "3.9"):
        res = ConfigResource("topic", topic, set_config={"message.format.version": version})
        a.alter_configs([res])[res].result(30)
        assert described("topic", topic)["message.format.version"] == version
    for version in ("banana", "0.7.0", "3.10", "4.0"):  # not versions Kafka 3.9 parses
        res = ConfigResource("topic", topic, set_config={"message.format.version": version})
        with pytest.raises(KafkaException) as e:
            a.alter_configs([res])[res].result(30)
        assert e.value.args[0].code() == KafkaError.INVALID_CONFIG, version

    deprecated_topic = {"message.format.version": "3.0-IV1",
                        "message.timestamp.difference.max.ms": "9223372036854775807"}
    a.create_topics([NewTopic("deprecated-defaults", 1, 1)])["deprecated-defaults"].result(30)
    topic_configs = described("topic", "deprecated-defaults")
    assert {k: topic_configs.get(k) for k in deprecated_topic} == deprecated_topic
    deprecated_broker = {"log.message.format.version": "3.0-IV1",
                         "log.message.timestamp.difference.max.ms": "9223372036854775807",
                         "offsets.commit.required.acks": "-1"}
    broker_configs = described("broker", str(broker.broker.context.node_id))
    assert {k: broker_configs.get(k) for k in deprecated_broker} == deprecated_broker
