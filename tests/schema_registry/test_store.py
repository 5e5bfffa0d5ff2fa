"""The ``_schemas`` topic is the registry's only state: Confluent's record format, a restart (or kill -9) rebuilds
everything from it, ids never repeat, and the topic is checked (one partition, compacted)."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from schema_registry_fixtures import BROKER_CONFIG, registry_process, start_registry
from schema_registry_rest import Rest, record
from tidelake.broker.embedded import EmbeddedBroker
from tidelake.schema_registry.kafka_store import StoreError
from tidelake.schema_registry.records import SchemaValue, StoreKey
from tidelake.schema_registry.state import RegistryState


def read_topic(bootstrap: str, topic: str = "_schemas") -> list[tuple[dict, dict | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    for _ in range(100):
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            break
        out.append((json.loads(msg.key()), None if msg.value() is None else json.loads(msg.value())))
    consumer.close()
    return out


def test_records_are_confluents(registry_broker):
    with start_registry(registry_broker.bootstrap_servers) as registry:
        api = Rest(registry.url)
        sid = api.register("fmt-value", record("R", ("a", "int"))).body["id"]
        api.put("/config/fmt-value", {"compatibility": "FULL"})
        api.put("/mode", {"mode": "READWRITE"})
        api.delete("/subjects/fmt-value")
    records = read_topic(registry_broker.bootstrap_servers)
    keys = [k for k, _ in records]
    assert {"keytype": "SCHEMA", "subject": "fmt-value", "version": 1, "magic": 1} in keys
    schema_value = next(v for k, v in records if k["keytype"] == "SCHEMA")
    assert schema_value["id"] == sid and schema_value["subject"] == "fmt-value" and schema_value["deleted"] is False
    assert ({"keytype": "CONFIG", "subject": "fmt-value", "magic": 0}, {"compatibilityLevel": "FULL",
                                                                          "subject": "fmt-value"}) in records
    assert ({"keytype": "MODE", "subject": None, "magic": 0}, {"mode": "READWRITE"}) in records
    assert ({"keytype": "DELETE_SUBJECT", "subject": "fmt-value", "magic": 0},
            {"subject": "fmt-value", "version": 1}) in records
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap_servers})
    topic = admin.list_topics(timeout=10).topics["_schemas"]
    assert len(topic.partitions) == 1


def test_a_restarted_registry_has_everything_back(registry_broker):
    with start_registry(registry_broker.bootstrap_servers) as registry:
        api = Rest(registry.url)
        ids = [api.register(f"restart-{i}", record(f"R{i}", ("a", "int"))).body["id"] for i in range(5)]
        api.put("/config/restart-0", {"compatibility": "NONE"})
        api.delete("/subjects/restart-4")
    with start_registry(registry_broker.bootstrap_servers) as registry:
        api = Rest(registry.url)
        assert api.get("/subjects").body == [f"restart-{i}" for i in range(4)]
        assert [api.get(f"/subjects/restart-{i}/versions/1").body["id"] for i in range(4)] == ids[:4]
        assert api.get("/config/restart-0").body == {"compatibilityLevel": "NONE"}
        assert api.register("restart-new", record("New", ("a", "int"))).body["id"] == max(ids) + 1


def test_kill_9_loses_no_registered_schema(registry_broker):
    with registry_process(registry_broker.bootstrap_servers) as (url, proc):
        api = Rest(url)
        ids = [api.register(f"killed-{i}", record(f"K{i}", ("a", "int"))).body["id"] for i in range(3)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    with registry_process(registry_broker.bootstrap_servers) as (url, _proc):
        api = Rest(url)
        assert [api.get(f"/subjects/killed-{i}/versions/1").body["id"] for i in range(3)] == ids
        # the killed process holds the primary's place until its group session times out; writes meanwhile get
        # 50003 (forwarding to it fails), then the survivor is elected and takes the next id
        answer = api.register("killed-new", record("KN", ("a", "int")))
        for _ in range(60):
            if answer.status == 200:
                break
            assert answer.body["error_code"] in (50003, 50004), answer
            time.sleep(0.5)
            answer = api.register("killed-new", record("KN", ("a", "int")))
        assert answer.body["id"] == max(ids) + 1


def test_ids_never_repeat_after_the_highest_is_hard_deleted_and_compacted_away():
    """What a compacted topic holds after a hard delete of the highest id: the schema record and its tombstone
    are gone, only the max-id record written before the tombstone remains."""
    state = RegistryState()
    keep = SchemaValue("s", 1, 7, '"string"')
    state.apply(0, StoreKey("SCHEMA", "s", 1).encode(), json.dumps(keep.to_json()).encode())
    state.apply(5, StoreKey("TIDELAKE_MAX_ID").encode(), json.dumps({"maxId": 9}).encode())
    assert state.max_id == 9


def test_hard_delete_of_the_highest_id_writes_the_max_id_first(registry_broker):
    with start_registry(registry_broker.bootstrap_servers) as registry:
        api = Rest(registry.url)
        sid = api.register("maxid", record("M", ("a", "int"))).body["id"]
        api.delete("/subjects/maxid")
        api.delete("/subjects/maxid", permanent=True)
    records = read_topic(registry_broker.bootstrap_servers)
    marker = [i for i, (k, _) in enumerate(records) if k["keytype"] == "TIDELAKE_MAX_ID"]
    tombstone = [i for i, (k, v) in enumerate(records) if k["keytype"] == "SCHEMA" and v is None]
    assert marker and tombstone and marker[0] < tombstone[0]
    assert records[marker[0]][1] == {"maxId": sid}


def test_confluents_unknown_record_types_are_skipped():
    state = RegistryState()
    state.apply(0, json.dumps({"keytype": "CONTEXT", "tenant": "x", "context": "y", "magic": 0}).encode(), b"{}")
    state.apply(1, StoreKey("SCHEMA", "s", 1).encode(), json.dumps(SchemaValue("s", 1, 1, '"int"').to_json()).encode())
    assert state.subjects() == ["s"] and state.offset == 1


def test_a_schemas_topic_with_two_partitions_is_refused(tmp_path):
    with EmbeddedBroker(tmp_path / "b", config=BROKER_CONFIG) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("_schemas", 2, 1, config={"cleanup.policy": "compact"})])["_schemas"].result(10)
        with pytest.raises(StoreError, match="2 partitions"):
            with start_registry(broker.bootstrap_servers):
                pass
        admin.create_topics([NewTopic("_deleting", 1, 1, config={"cleanup.policy": "delete"})])["_deleting"].result(10)
        with pytest.raises(StoreError, match="cleanup.policy=delete"):
            with start_registry(broker.bootstrap_servers, {"kafkastore.topic": "_deleting"}):
                pass


def test_any_kafka_a_registry_on_tansu(tansu):
    """The registry is a Kafka client: another broker (Tansu, the project's peer) keeps `_schemas` as well."""
    with start_registry(tansu) as registry:
        sid = Rest(registry.url).register("tansu-value", record("T", ("a", "int"))).body["id"]
    with start_registry(tansu) as registry:
        assert Rest(registry.url).get("/subjects/tansu-value/versions/1").body["id"] == sid
        assert Rest(registry.url).register("tansu-2", record("T2", ("a", "int"))).body["id"] == sid + 1


def test_an_open_transaction_left_by_a_dead_writer_does_not_block_the_start(registry_broker):
    """A primary killed inside a write leaves its transaction open until the broker times it out: a new registry
    reads to the last stable offset (what read_committed can reach), becomes primary, and that aborts it."""
    from confluent_kafka import Producer
    with start_registry(registry_broker.bootstrap_servers) as registry:
        sid = Rest(registry.url).register("before-crash", record("B", ("a", "int"))).body["id"]
    orphan = Producer({"bootstrap.servers": registry_broker.bootstrap_servers,
                       "transactional.id": "schema-registry-primary", "transaction.timeout.ms": 120000})
    orphan.init_transactions(10)
    orphan.begin_transaction()
    value = SchemaValue("half-written", 1, sid + 1, '"string"')
    orphan.produce("_schemas", key=StoreKey("SCHEMA", "half-written", 1).encode(),
                   value=json.dumps(value.to_json()).encode(), partition=0)
    orphan.flush(10)                                    # appended, never committed
    with start_registry(registry_broker.bootstrap_servers, {"kafkastore.init.timeout.ms": "15000"}) as registry:
        api = Rest(registry.url)
        assert api.get("/subjects").body == ["before-crash"]
        assert api.register("after-crash", record("A", ("a", "int"))).body["id"] == sid + 1
