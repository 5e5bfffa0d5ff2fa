"""tidelake's own parts with a real Apache Kafka 4.4 broker in the place of tidelake's (issue 37, item 2):
`tidelake pipeline run` exactly-once into a table, killed with -9 mid-run and run again to the end (nothing lost,
nothing doubled), the web console's topic, message and group pages (a consumer group and a share group of
Kafka 4.4's KafkaShareConsumer), two schema registry processes with `_schemas` on Kafka (the primary stopped: the
other takes over, ids go on), the broker-side CLI commands with their output checked, and Kafka 4.4's own tools
from the pinned jars run against both this Kafka and a tidelake broker (issue 36 item 4), each command's output
checked, equal to Kafka's where tidelake implements the same thing: kafka-configs describing client quotas with
none set, then setting, describing and removing user, client-id and ip quotas and their defaults; kafka-metadata-quorum
describe --status / --replication; kafka-features describe, upgrade/downgrade refusals and a downgrade and upgrade
of transaction.version (on tidelake only: this Kafka keeps transactions v2 for the other tests); kafka-topics
--describe --topic-id; kafka-configs on the brokers' default entity and a topic's synonyms. The tools of one test
run in one JVM per broker (tests/java/ToolBatch.java, `kafka44/kafka_tools.py`). One Kafka broker for the module.

What Kafka answers differently from tidelake's broker, as these commands show it (`topics list` naming
__consumer_offsets once a group committed, and `acls list` refused with SECURITY_DISABLED without an authorizer,
are the same on both):
- Kafka's metadata quorum is a Raft log with its own CONTROLLER listener; tidelake's one voter is the broker itself
  on its client listener, its high watermark the metadata states written (tidelake/broker/handlers/quorum.py);
- kafka-features lists Kafka's metadata.version, kraft.version and eligible.leader.replicas.version too, and
  group.version / share.version supported from 0 (and share.version up to 2); tidelake lists what it implements, at
  the levels it can run (tidelake/broker/features.py);
- a KRaft cluster formatted by Kafka 4.4 holds the cluster-wide dynamic default min.insync.replicas=1, so
  `topics describe` and `configs describe --entity-type topics` list it among the configs "set on the topic"
  (source DYNAMIC_DEFAULT_BROKER_CONFIG);
- a share group's share.record.lock.duration.ms must lie in 15000..60000 on Kafka (its brokers'
  group.share.min/max.record.lock.duration.ms); tidelake's broker takes 2000 (tests/broker/test_java_share_consumer.py)."""
from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from console_fixtures import ConsoleProcess
from conftest import stop_process
from kafka44.kafka_tools import CONFIGS, FEATURES, METADATA_QUORUM, TOPICS, run_batches, run_on_both
from kafka_peer import java_command
from pipeline.test_kill import PARTITIONS, PER_PARTITION, TOTAL, PipelineProcess, run_once_to_the_end, topic_and_pipeline
from schema_registry_fixtures import registry_process
from schema_registry_rest import Rest, record
from tidelake.broker import EmbeddedBroker
from tidelake.table import Table

pytestmark = pytest.mark.java


def cli(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    """One `tidelake` command against the broker; its stdout (it must exit 0)."""
    r = subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args, "-b", bootstrap], input=stdin,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"tidelake {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def cli_error(bootstrap: str, *args: str) -> str:
    """A `tidelake` command the broker refuses: its one error line (exit 1, no trace)."""
    r = subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args, "-b", bootstrap],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr.strip()


def rows(table_output: str) -> list[list[str]]:
    return [line.split() for line in table_output.splitlines() if line.strip()]


def test_cli_topics_produce_consume_groups_and_configs(kafka44):
    bs = kafka44.bootstrap_servers
    assert cli(bs, "topics", "create", "cli-t", "--partitions", "3", "--config", "retention.ms=3600000") == \
        "Created topic cli-t.\n"
    assert "cli-t" in cli(bs, "topics", "list").split()

    [described] = json.loads(cli(bs, "topics", "describe", "cli-t", "--json"))
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in described["partitions"]] == [
        (i, 1, [1], [1]) for i in range(3)]
    configs = {c["name"]: (c["value"], c["source"]) for c in described["configs"]}
    assert configs["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert configs.get("min.insync.replicas") == ("1", "DYNAMIC_DEFAULT_BROKER_CONFIG")   # Kafka's KRaft default

    lines = [f"k{i}:v{i}" for i in range(30)]
    cli(bs, "produce", "cli-t", "--key-separator", ":", stdin="\n".join(lines) + "\n")
    consumed = cli(bs, "consume", "cli-t", "--from-beginning", "--max-messages", "30", "--group", "cli-g")
    assert sorted(consumed.split()) == sorted(f"v{i}" for i in range(30))

    assert ["cli-g", "Empty", "classic", "consumer"] in rows(cli(bs, "groups", "list"))
    group = json.loads(cli(bs, "groups", "describe", "cli-g", "--json"))
    assert (group["group"], group["state"], group["type"], group["members"]) == ("cli-g", "EMPTY", "classic", 0)
    committed = {p["partition"]: (p["current_offset"], p["log_end_offset"], p["lag"]) for p in group["partitions"]}
    assert sum(cur for cur, _, _ in committed.values()) == 30 and all(
        cur == end and lag == 0 for cur, end, lag in committed.values()), group
    assert ["cli-g", "cli-t"] in [r[:2] for r in rows(cli(bs, "groups", "describe", "cli-g"))]

    topic_configs = rows(cli(bs, "configs", "describe", "--entity-type", "topics", "--entity-name", "cli-t"))
    assert ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG", "no", "no"] in topic_configs
    broker_configs = {r[0]: r[1:] for r in rows(cli(bs, "configs", "describe", "--entity-type", "brokers",
                                                    "--entity-name", "1"))}
    assert broker_configs["node.id"] == ["1", "STATIC_BROKER_CONFIG", "yes", "no"]
    assert broker_configs["advertised.listeners"][0] == f"PLAINTEXT://{bs}"

    assert cli_error(bs, "groups", "describe", "nope") == \
        "tidelake: error: consumer group nope does not exist (tidelake groups describe)"
    assert cli_error(bs, "topics", "describe", "nope") == \
        "tidelake: error: unknown topic(s): nope (tidelake topics describe)"
    assert "SECURITY_DISABLED" in cli_error(bs, "acls", "list")

    assert cli(bs, "groups", "delete", "cli-g") == "deleted group cli-g\n"
    assert cli(bs, "topics", "delete", "cli-t") == "Deleted topic cli-t.\n"
    assert "cli-t" not in cli(bs, "topics", "list").split()


@pytest.mark.spark
def test_pipeline_exactly_once_survives_kill_9(kafka44, tmp_path):
    """test_kill's scenario with Kafka 4.4 as the source: killed after its first batch, then `--once`."""
    config = topic_and_pipeline(kafka44.bootstrap_servers, tmp_path, "k44-orders", group_id="k44-eo",
                                max_rate_per_partition=100, keyed=True)
    run = PipelineProcess(config)
    run.wait_batches(1)
    time.sleep(random.uniform(0.0, 1.5))   # anywhere in the next batch (read, stage, commit) or between
    run.kill()
    assert run.proc.returncode == -signal.SIGKILL
    table = Table.open(str(tmp_path / "table"))
    before = table.app_state("pipeline:k44-eo:k44-orders")
    assert before is not None and sum(before["extra"]["offsets"].values()) < TOTAL   # the kill left work to do

    run_once_to_the_end(config)

    table.refresh()
    ids = table.changes(start_version=0).column("id").to_pylist()
    assert len(Counter(ids)) == TOTAL, f"lost {TOTAL - len(Counter(ids))}"
    assert len(ids) == TOTAL, f"duplicated {len(ids) - TOTAL}"
    assert sorted(table.scan().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "amount": i * 3} for i in range(TOTAL)]
    assert table.app_state("pipeline:k44-eo:k44-orders")["extra"]["offsets"] == {
        str(p): PER_PARTITION for p in range(PARTITIONS)}


def test_schema_registry_processes_on_kafka_fail_over(kafka44):
    bs = kafka44.bootstrap_servers
    with registry_process(bs) as (url_a, proc_a), registry_process(bs) as (url_b, proc_b):
        first = [Rest(url).register(f"k44-{i}", record(f"K{i}", ("a", "int"))).body["id"]
                 for i, url in enumerate([url_a, url_b])]
        assert sorted(first) == [1, 2]
        primary_a = "tidelake_schema_registry_primary 1.0" in Rest(url_a).get("/metrics").body
        assert primary_a != ("tidelake_schema_registry_primary 1.0" in Rest(url_b).get("/metrics").body)
        stop_process(proc_a if primary_a else proc_b)      # the primary goes: the other is elected
        survivor = url_b if primary_a else url_a
        deadline = time.monotonic() + 60    # a last guard: the wait ends when the survivor says it is primary
        while "tidelake_schema_registry_primary 1.0" not in Rest(survivor).get("/metrics").body:
            assert time.monotonic() < deadline, "the surviving registry was not elected"
            time.sleep(0.2)
        answer = Rest(survivor).register("k44-after", record("KA", ("a", "int")))
        assert answer.status == 200 and answer.body["id"] == 3, answer
        assert Rest(survivor).get("/subjects").body == ["k44-0", "k44-1", "k44-after"]


def test_console_pages_on_kafka(kafka44, tmp_path):
    bs = kafka44.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("k44-console", 2, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bs})
    for i in range(20):
        p.produce("k44-console", json.dumps({"id": i, "note": f"note-{i}"}).encode(), key=b"id-%d" % i,
                  partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": "k44-console-app", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["k44-console"])
    read = 0
    for _ in range(240):   # a last guard; the loop ends on the count
        if read >= 20:
            break
        m = c.poll(0.5)
        read += m is not None and m.error() is None
    c.commit(asynchronous=False)
    c.close()
    # a share group on Kafka's own share coordinator, read to the end by Kafka 4.4's share consumer
    share = subprocess.run(java_command("ShareClient", bs, "k44-console-share", "k44-console", "0", "20", "implicit"),
                           capture_output=True, text=True, timeout=180)
    assert share.returncode == 0, share.stdout[-2000:] + share.stderr[-3000:]

    (tmp_path / "tables").mkdir()
    (tmp_path / "pipelines").mkdir()
    console = ConsoleProcess(["-b", bs, "--tables", str(tmp_path / "tables"), "--pipelines", str(tmp_path / "pipelines")])
    try:
        def page(path: str) -> str:
            with urllib.request.urlopen(console.url + path, timeout=60) as answer:
                assert answer.status == 200, path
                return answer.read().decode()

        assert "k44-console" in page("/topics")
        assert "k44-console" in page("/topics/k44-console")
        assert "note-0" in page("/topics/k44-console/messages?partition=0")
        groups = page("/groups")
        assert "k44-console-app" in groups and "k44-console-share" in groups
        assert "k44-console" in page("/groups/k44-console-app")
        assert "k44-console" in page("/groups/k44-console-share")
    finally:
        stderr = console.stop()
    assert "Traceback" not in stderr, stderr


@pytest.fixture(scope="module")
def tidelake_bootstrap(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("tidelake"), port=0) as broker:
        yield broker.bootstrap_servers


def describe_quotas(bootstrap: str, entity_type: str) -> str:
    done = subprocess.run(java_command("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", bootstrap, "--describe",
                                       "--entity-type", entity_type), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("entity_type", ["users", "clients", "ips"])
def test_describe_quotas_with_none_set_answers_as_kafka(kafka44, tidelake_bootstrap, entity_type):
    on_kafka = describe_quotas(kafka44.bootstrap_servers, entity_type)
    on_tidelake = describe_quotas(tidelake_bootstrap, entity_type)
    assert on_tidelake == on_kafka


# -- Kafka 4.4's own tools against both brokers (issue 36 item 4), each batch of commands in one JVM per broker ------

def test_quotas_altered_and_described_by_kafka_configs_as_on_kafka(kafka44, tidelake_bootstrap):
    alter = ("--alter", "--entity-type")
    describe = ("--describe", "--entity-type")
    commands = [
        (CONFIGS, *alter, "users", "--entity-name", "k44-alice", "--add-config",
         "producer_byte_rate=1024,consumer_byte_rate=2048"),
        (CONFIGS, *alter, "users", "--entity-default", "--add-config", "request_percentage=50"),
        (CONFIGS, *alter, "users", "--entity-name", "k44-alice", "--entity-type", "clients", "--entity-name", "app",
         "--add-config", "producer_byte_rate=4096"),
        (CONFIGS, *alter, "clients", "--entity-default", "--add-config", "consumer_byte_rate=10"),
        (CONFIGS, *alter, "ips", "--entity-name", "10.1.2.3", "--add-config", "connection_creation_rate=10"),
        (CONFIGS, *alter, "ips", "--entity-default", "--add-config", "connection_creation_rate=100"),
        (CONFIGS, *describe, "users"),
        (CONFIGS, *describe, "users", "--entity-name", "k44-alice"),
        (CONFIGS, *describe, "users", "--entity-default"),
        (CONFIGS, *describe, "users", "--entity-name", "k44-alice", "--entity-type", "clients"),
        (CONFIGS, *describe, "clients"),
        (CONFIGS, *describe, "ips"),
        (CONFIGS, *describe, "ips", "--entity-name", "10.1.2.3"),
        # refused by the broker: a fraction for a LONG quota (INVALID_REQUEST with Kafka's message)
        (CONFIGS, *alter, "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=1.5"),
        (CONFIGS, *alter, "users", "--entity-name", "k44-alice", "--delete-config", "consumer_byte_rate"),
        (CONFIGS, *describe, "users", "--entity-name", "k44-alice"),
        # the module's brokers back to no quotas
        (CONFIGS, *alter, "users", "--entity-name", "k44-alice", "--delete-config", "producer_byte_rate"),
        (CONFIGS, *alter, "users", "--entity-default", "--delete-config", "request_percentage"),
        (CONFIGS, *alter, "users", "--entity-name", "k44-alice", "--entity-type", "clients", "--entity-name", "app",
         "--delete-config", "producer_byte_rate"),
        (CONFIGS, *alter, "clients", "--entity-default", "--delete-config", "consumer_byte_rate"),
        (CONFIGS, *alter, "ips", "--entity-name", "10.1.2.3", "--delete-config", "connection_creation_rate"),
        (CONFIGS, *alter, "ips", "--entity-default", "--delete-config", "connection_creation_rate"),
        (CONFIGS, *describe, "users"),
    ]
    runs = run_on_both(kafka44.bootstrap_servers, tidelake_bootstrap, commands)
    for command, (on_kafka, on_tidelake) in zip(commands, runs):
        assert (on_tidelake.code, on_tidelake.out) == (on_kafka.code, on_kafka.out), command
    refused = runs[13][1]
    assert refused.code == 1 and "producer_byte_rate cannot be a fractional value." in refused.err
    assert runs[6][1].out.splitlines() == [
        "Quota configs for the default user-principal are request_percentage=50.0",
        "Quota configs for user-principal 'k44-alice' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"]
    assert runs[-1][1].out == ""


def test_metadata_quorum_and_features_described_as_on_kafka(kafka44, tidelake_bootstrap):
    commands = [(METADATA_QUORUM, "describe", "--status"), (METADATA_QUORUM, "describe", "--replication"),
                (FEATURES, "describe"),
                (FEATURES, "upgrade", "--feature", "transaction.version=1"),
                (FEATURES, "upgrade", "--feature", "no.such.version=1"),
                (FEATURES, "downgrade", "--feature", "transaction.version=1", "--dry-run")]
    # tidelake alone is then downgraded and upgraded back (the module's Kafka keeps transactions v2)
    tidelake_only = [(FEATURES, "downgrade", "--feature", "transaction.version=1"), (FEATURES, "describe"),
                     (FEATURES, "upgrade", "--feature", "transaction.version=2")]
    batches = run_batches({kafka44.bootstrap_servers: commands, tidelake_bootstrap: commands + tidelake_only})
    runs = list(zip(batches[kafka44.bootstrap_servers], batches[tidelake_bootstrap]))
    (status_k, status_t), (replication_k, replication_t), (features_k, features_t) = runs[:3]

    def fields(out: str) -> dict[str, str]:
        return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}

    status = fields(status_t.out)
    assert status_t.code == 0 and list(status) == list(fields(status_k.out))
    assert (status["LeaderId"], status["LeaderEpoch"], status["MaxFollowerLag"], status["CurrentObservers"]) == (
        "1", "1", "0", "[]")
    assert int(status["HighWatermark"]) >= 0
    assert status["CurrentVoters"] == f'[{{"id": 1, "endpoints": ["PLAINTEXT://{tidelake_bootstrap}"]}}]'
    header_k, *rows_k = replication_k.out.splitlines()
    header_t, *rows_t = replication_t.out.splitlines()
    assert header_t == header_k and len(rows_t) == len(rows_k) == 1
    assert rows_t[0].split()[:4] == ["1", "AAAAAAAAAAAAAAAAAAAAAA", status["HighWatermark"], "0"]
    assert rows_t[0].split()[-1] == "Leader"

    # the features tidelake implements, as Kafka lists them (epochs apart; group.version and share.version run at
    # 1 only on tidelake, see tidelake/broker/features.py), and no others
    def listed(out: str) -> dict[str, str]:
        return {line.split()[1]: line.rpartition("Epoch:")[0].strip() for line in out.splitlines()}

    on_kafka, on_tidelake = listed(features_k.out), listed(features_t.out)
    assert sorted(on_tidelake) == ["group.version", "share.version", "streams.version", "transaction.version"]
    for name in ("transaction.version", "streams.version"):
        assert on_tidelake[name] == on_kafka[name]
    for name in ("group.version", "share.version"):
        assert on_tidelake[name].split()[-1] == "1"
    for command, (on_kafka_run, on_tidelake_run) in zip(commands[3:], runs[3:]):
        assert (on_tidelake_run.code, on_tidelake_run.out) == (on_kafka_run.code, on_kafka_run.out), command
    assert "Can't downgrade the version of this feature without setting the upgrade type" in runs[3][1].out
    assert runs[5][1].out == "transaction.version can be downgraded to 1.\n"

    down, listed_down, up = batches[tidelake_bootstrap][len(commands):]
    assert (down.code, down.out, up.code, up.out) == (0, "transaction.version was downgraded to 1.\n",
                                                      0, "transaction.version was upgraded to 2.\n")
    assert "FinalizedVersionLevel: 1" in [line for line in listed_down.out.splitlines()
                                         if "transaction.version" in line][0]


def test_topic_by_id_broker_defaults_and_synonyms_as_on_kafka(kafka44, tidelake_bootstrap):
    topic_ids = {}   # the topic's id on each broker, in Kafka's text form (base64, unpadded), as kafka-topics takes it
    for broker in (kafka44.bootstrap_servers, tidelake_bootstrap):
        admin = AdminClient({"bootstrap.servers": broker})
        for f in admin.create_topics([NewTopic("k44-by-id", 2, 1)]).values():
            f.result(30)
        [described] = admin.describe_topics(TopicCollection(["k44-by-id"]))["k44-by-id"].result(30),
        # confluent-kafka prints a Uuid in standard base64; Kafka's tools read the URL-safe alphabet
        topic_ids[broker] = str(described.topic_id).replace("+", "-").replace("/", "_")

    def per_broker(topic_id: str) -> list[tuple[str, ...]]:
        return [
            (TOPICS, "--describe", "--topic-id", topic_id),
            (TOPICS, "--describe", "--topic-id", "AAAAAAAAAAAAAAAAAAAAAQ"),
            (CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.cleaner.threads=2"),
            (CONFIGS, "--describe", "--entity-type", "brokers", "--entity-default"),
            (CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1"),
            (CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"),
            (CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", "k44-by-id", "--all"),
            (CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
             "log.cleaner.threads"),
            (CONFIGS, "--describe", "--entity-type", "brokers", "--entity-default"),
            (TOPICS, "--delete", "--topic", "k44-by-id"),
        ]
    runs = run_batches({broker: per_broker(topic_id) for broker, topic_id in topic_ids.items()})
    on_kafka, on_tidelake = runs[kafka44.bootstrap_servers], runs[tidelake_bootstrap]
    (by_id_k, unknown_k, set_default_k, defaults_k, broker1_k, all_k, topic_k, unset_k, unset_described_k,
     deleted_k) = on_kafka
    (by_id_t, unknown_t, set_default_t, defaults_t, broker1_t, all_t, topic_t, unset_t, unset_described_t,
     deleted_t) = on_tidelake

    # by id: the same partitions (Kafka's topic line also lists its KRaft default min.insync.replicas=1)
    assert by_id_t.code == 0 and by_id_t.out.splitlines()[1:] == by_id_k.out.splitlines()[1:]
    assert by_id_t.out.splitlines()[0].startswith(f"Topic: k44-by-id\tTopicId: {topic_ids[tidelake_bootstrap]}\t")
    assert (unknown_t.code, unknown_t.out) == (unknown_k.code, unknown_k.out) == (
        1, "Error while executing topic command : TopicId 'AAAAAAAAAAAAAAAAAAAAAQ' does not exist as expected\n")

    # the cluster-wide default entity: Kafka's KRaft cluster also holds min.insync.replicas=1 there
    kafka_default_lines = [line for line in defaults_k.out.splitlines() if "min.insync.replicas" not in line]
    assert defaults_t.out.splitlines() == kafka_default_lines == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}"]
    for k, t in ((set_default_k, set_default_t), (broker1_k, broker1_t), (unset_k, unset_t), (deleted_k, deleted_t)):
        assert (t.code, t.out) == (k.code, k.out)
    assert broker1_t.out == "Dynamic configs for broker 1 are:\n"
    assert unset_described_t.out == "Default configs for brokers in the cluster are:\n"

    def line_of(out: str, name: str) -> str:
        return next(line for line in out.splitlines() if line.startswith(f"  {name}="))

    # broker configs by their own names and units, a topic config's synonyms as Kafka lists them
    for name in ("log.cleaner.threads", "log.retention.hours", "log.segment.bytes"):
        assert line_of(all_t.out, name) == line_of(all_k.out, name)
    for name in ("retention.ms", "delete.retention.ms", "segment.bytes", "cleanup.policy"):
        assert line_of(topic_t.out, name) == line_of(topic_k.out, name)
    assert line_of(topic_t.out, "retention.ms") == "  retention.ms=604800000 sensitive=false synonyms={}"
