"""After a broker restart on the same data directory every record, offset, watermark, timestamp
lookup and topic config is unchanged, and new records continue at the old high watermark."""
from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from clients import CODECS, Rec, consume, produce, running_broker, sample_records

PARTITIONS = 3
RECORDS = 60
WRITER_FOR_CODEC = {"none": "kafka-python", "gzip": "confluent", "snappy": "kafka-python", "lz4": "aiokafka",
                    "zstd": "confluent"}
CONFIG_TOPIC = "rs-configs"
TRIMMED = ("rs-none", 0, 5)  # DeleteRecords before offset 5 on this partition


def _topic(codec: str) -> str:
    return f"rs-{codec}"


def _snapshot(bootstrap: str, counts: dict[tuple[str, int], int]) -> dict:
    """Everything the clients can observe: records (with offsets), watermarks, time lookups, configs."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-unused"})
    try:
        watermarks = {tp: consumer.get_watermark_offsets(TopicPartition(*tp), timeout=30, cached=False)
                      for tp in counts}
        lookups = {}
        for (t, p) in counts:
            for ts in (1_600_000_000_000, 1_600_000_000_000 + 10 * 17 + 5, 1_600_000_000_000 + 10 * RECORDS):
                (res,) = consumer.offsets_for_times([TopicPartition(t, p, ts)], timeout=30)
                lookups[(t, p, ts)] = (res.offset, res.error)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, CONFIG_TOPIC)
    configs = admin.describe_configs([resource])[resource].result(30)
    dynamic = {k: v.value for k, v in configs.items() if v.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    partitions = {t: len(m.partitions) for t, m in admin.list_topics(timeout=30).topics.items()
                  if t.startswith("rs-")}
    live = {tp: n - (TRIMMED[2] if tp == TRIMMED[:2] else 0) for tp, n in counts.items()}
    return {"records": consume("confluent", bootstrap, live, timeout=60), "watermarks": watermarks,
            "lookups": lookups, "dynamic_configs": dynamic, "partitions": partitions}


def test_restart_keeps_records_offsets_and_configs(tmp_path: Path) -> None:
    data_dir = tmp_path / "broker"
    counts: dict[tuple[str, int], int] = {}
    with running_broker("tidelake", data_dir) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = [NewTopic(_topic(c), PARTITIONS, 1) for c in CODECS]
        new.append(NewTopic(CONFIG_TOPIC, 2, 1, config={"retention.ms": "7200000", "segment.bytes": "1048576",
                                                        "cleanup.policy": "delete"}))
        for f in admin.create_topics(new, operation_timeout=30).values():
            f.result(30)
        for codec in CODECS:
            acked = produce(WRITER_FOR_CODEC[codec], bootstrap, _topic(codec),
                            sample_records(f"restart/{codec}", RECORDS, PARTITIONS), codec)
            for a in acked:
                counts[(_topic(codec), a.partition)] = max(counts.get((_topic(codec), a.partition), 0), a.offset + 1)
        (trim,) = admin.delete_records([TopicPartition(*TRIMMED)], request_timeout=30).values()
        assert trim.result(30).low_watermark == TRIMMED[2]  # the new log start offset
        before = _snapshot(bootstrap, counts)

    assert sum(len(v) for v in before["records"].values()) == RECORDS * len(CODECS) - TRIMMED[2]
    assert before["watermarks"][TRIMMED[:2]] == (TRIMMED[2], RECORDS // PARTITIONS)
    assert before["dynamic_configs"] == {"retention.ms": "7200000", "segment.bytes": "1048576",
                                         "cleanup.policy": "delete"}

    with running_broker("tidelake", data_dir) as bootstrap:
        after = _snapshot(bootstrap, counts)
        assert after["partitions"] == before["partitions"]
        assert after["watermarks"] == before["watermarks"]
        assert after["lookups"] == before["lookups"]
        assert after["dynamic_configs"] == before["dynamic_configs"]
        assert after["records"].keys() == before["records"].keys()
        for tp, recs in before["records"].items():
            assert after["records"][tp] == recs, f"{tp} changed across restart"
        # a second client library sees the same thing
        by_kafka_python = consume("kafka-python", bootstrap, {tp: len(r) for tp, r in before["records"].items()})
        for tp, recs in before["records"].items():
            assert [(r.offset, r.written()) for r in by_kafka_python[tp]] == [(r.offset, r.written()) for r in recs]

        # new records continue after the old end: no offset is reused
        for codec in ("zstd", "none"):
            more = [Rec(p, b"after", b"restart", 1_700_000_000_000) for p in range(PARTITIONS)]
            acked = produce("confluent", bootstrap, _topic(codec), more, codec)
            assert [a.offset for a in acked] == [before["watermarks"][(_topic(codec), p)][1] for p in range(PARTITIONS)]
