"""Broker and topic configs: properties files, precedence, synonyms, validation (sans-IO)."""
from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

import tidelake
from tidelake.broker.config import BrokerConfig, advertised_address, listen_address, parse_properties
from tidelake.broker.config_definitions import (BROKER_CONFIGS, SOURCE_DEFAULT, SOURCE_DYNAMIC_DEFAULT_BROKER,
                                                SOURCE_STATIC_BROKER, SOURCE_TOPIC,
                                                ConfigError)
from tidelake.broker.config_validation import validate_topic_configs
from tidelake.broker.listeners import Listener
from tidelake.protocol.wire_client import WireClient
from tidelake.errors import InvalidConfig


def test_properties_parsing_and_broker_precedence(tmp_path):
    props = parse_properties("# comment\nlog.segment.bytes=1024\n! other\nnum.partitions : 3\n\nlog.retention.hours=1\n")
    assert props == {"log.segment.bytes": "1024", "num.partitions": "3", "log.retention.hours": "1"}
    f = tmp_path / "server.properties"
    f.write_text("log.segment.bytes=1024\nlog.retention.hours=1\n")
    c = BrokerConfig.from_file(f, {"num.partitions": "5"})
    assert c.get_int("num.partitions") == 5
    # topic defaults come from broker synonyms, converted to the topic config's unit
    assert c.topic_default("segment.bytes") == ("1024", SOURCE_STATIC_BROKER)
    assert c.topic_default("retention.ms") == ("3600000", SOURCE_STATIC_BROKER)
    assert c.topic_default("cleanup.policy") == ("delete", SOURCE_DEFAULT)
    entries = {e.name: e for e in c.describe_topic({"cleanup.policy": "compact"}, with_synonyms=True)}
    assert entries["cleanup.policy"].source == SOURCE_TOPIC and entries["cleanup.policy"].value == "compact"
    # the value from log.retention.hours in ms; the synonyms listed as Kafka lists them: none before an entry of
    # log.retention.ms, the first synonym (Kafka's ConfigHelper drops them), each in its own name's unit
    assert entries["retention.ms"].value == "3600000" and entries["retention.ms"].synonyms == []
    c.set_dynamic("log.retention.ms", "5000", default=True)
    c.set_dynamic("log.retention.minutes", "3")
    entries = {e.name: e for e in c.describe_topic({}, with_synonyms=True)}
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("5000", SOURCE_DYNAMIC_DEFAULT_BROKER)
    assert entries["retention.ms"].synonyms == [("log.retention.ms", "5000", SOURCE_DYNAMIC_DEFAULT_BROKER),
                                                ("log.retention.hours", "1", SOURCE_STATIC_BROKER),
                                                ("log.retention.hours", "168", SOURCE_DEFAULT)]


def test_topic_config_validation():
    assert (validate_topic_configs({"cleanup.policy": "compact, delete"}, tiered_storage=False,
                                   schema_registry=False)
            == {"cleanup.policy": "compact,delete"})
    for bad in ({"no.such.config": "1"}, {"retention.ms": "abc"}, {"cleanup.policy": "shred"},
                {"message.timestamp.type": "Now"}, {"segment.bytes": "1"}):
        with pytest.raises(InvalidConfig):
            validate_topic_configs(bad, tiered_storage=False, schema_registry=False)


def test_remote_storage_enable_needs_the_broker_switch_and_a_delete_policy():
    tiered = {"remote.storage.enable": "true", "local.retention.bytes": "1024"}
    with pytest.raises(InvalidConfig, match="Tiered Storage functionality is disabled in the broker"):
        validate_topic_configs(tiered, tiered_storage=False, schema_registry=False)
    assert validate_topic_configs(tiered, tiered_storage=True, schema_registry=False) == tiered
    with pytest.raises(InvalidConfig, match="compacted topics"):
        validate_topic_configs({**tiered, "cleanup.policy": "compact"}, tiered_storage=True, schema_registry=False)


def test_copy_disable_needs_local_retention_equal_to_retention_as_kafka():
    base = {"remote.storage.enable": "true", "remote.log.copy.disable": "true"}
    for local, whole in (("local.retention.bytes", "retention.bytes"), ("local.retention.ms", "retention.ms")):
        with pytest.raises(InvalidConfig, match=f"`{local}` and `{whole}` must be set to the identical value"):
            validate_topic_configs({**base, local: "1000", whole: "2000"}, tiered_storage=True,
                                   schema_registry=False)
        for same in ({local: "2000", whole: "2000"}, {local: "-2", whole: "2000"}):
            assert validate_topic_configs({**base, **same}, tiered_storage=True,
                                          schema_registry=False) == {**base, **same}


def test_unknown_or_misspelled_static_keys_name_their_source_and_the_closest_name(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# a comment\nnum.partitions=2\n\nlog.retention.hour=1\n")
    with pytest.raises(ConfigError, match=r"^server\.properties:4: unknown broker config 'log\.retention\.hour' "
                                          r"\(did you mean 'log\.retention\.hours'\?\)$"):
        BrokerConfig.from_file(f)
    with pytest.raises(ConfigError, match=r"^--set: unknown broker config 'log\.segment\.byte' "
                                          r"\(did you mean 'log\.segment\.bytes'\?\)$"):
        BrokerConfig.from_file(None, {"log.segment.byte": "1024"})
    with pytest.raises(ConfigError, match=r"^--set: unknown broker config 'frobnicate'$"):
        BrokerConfig.from_file(None, {"frobnicate": "1"})
    f.write_text("num.partitions=many\n")
    with pytest.raises(ConfigError, match=r"^server\.properties:1: .*num\.partitions"):
        BrokerConfig.from_file(f)


def test_every_name_of_a_stock_kafka_server_properties_is_accepted(tmp_path):
    # Kafka 3.9's config/kraft/server.properties, and names the broker types or only stores
    f = tmp_path / "server.properties"
    f.write_text("""process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
listener.name.plaintext.ssl.keystore.type=PKCS12
""")
    c = BrokerConfig.from_file(f)
    assert c.listener() == Listener("PLAINTEXT", "127.0.0.1", 9092)
    assert c.advertised_listener() == Listener("PLAINTEXT", "localhost", 9092)
    assert listen_address(c, None) == ("127.0.0.1", 9092)
    assert advertised_address(c, None) == ("localhost", 9092)


def test_listeners_and_the_listen_shortcut(tmp_path):
    default = BrokerConfig.from_file(None)
    assert listen_address(default, None) == ("127.0.0.1", 9092)
    assert listen_address(default, "0.0.0.0:1234") == ("0.0.0.0", 1234)  # no listeners= to disagree with
    wildcard = BrokerConfig.from_file(None, {"listeners": "PLAINTEXT://:19092"})
    assert listen_address(wildcard, None) == ("0.0.0.0", 19092)
    assert listen_address(wildcard, ":19092") == ("0.0.0.0", 19092)  # agreeing is fine
    with pytest.raises(ConfigError, match="--listen 127.0.0.1:1 disagrees with listeners=PLAINTEXT://:19092"):
        listen_address(wildcard, "127.0.0.1:1")
    assert advertised_address(wildcard, "example.com:9") == ("example.com", 9)
    assert advertised_address(wildcard, None) == (None, None)
    f = tmp_path / "server.properties"
    for text, message in [
        ("listeners=INTERNAL://:9093\n", r"^server\.properties:1: listeners: INTERNAL://:9093 has no security "
                                         r"protocol \(got 'INTERNAL'; map it in listener\.security\.protocol\.map"),
        ("listeners=INTERNAL://:9093\nlistener.security.protocol.map=INTERNAL:KERBEROS\n",
         "INTERNAL://:9093 has no security protocol"),
        ("listeners=localhost:9092\n", r"^server\.properties:1: listeners: expected NAME://HOST:PORT"),
        ("listeners=PLAINTEXT://:1,PLAINTEXT://:2\n", "listener name PLAINTEXT is used twice"),
        ("listeners=PLAINTEXT://:1,SSL://:1\n", "PLAINTEXT://:1 and SSL://:1 use the same port"),
        ("listeners=PLAINTEXT://:1\ninter.broker.listener.name=OTHER\n", "OTHER is not one of the listeners"),
        ("listeners=PLAINTEXT://:1\nadvertised.listeners=OTHER://h:1\n",
         r"^server\.properties:2: advertised\.listeners: no entry for listener OTHER"),
    ]:
        f.write_text(text)
        with pytest.raises(ConfigError, match=message):
            BrokerConfig.from_file(f)
    # a listener mapped to PLAINTEXT by name is served; several listeners, each with its protocol
    f.write_text("listeners=INTERNAL://127.0.0.1:0\nlistener.security.protocol.map=INTERNAL:PLAINTEXT\n")
    assert BrokerConfig.from_file(f).listener() == Listener("INTERNAL", "127.0.0.1", 0)
    f.write_text("listeners=PLAINTEXT://:9092,SASL_SSL://:9093,CLIENT://:9094\n"
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CLIENT:SSL\n"
                 "advertised.listeners=SASL_SSL://example.com:19093\n")
    config = BrokerConfig.from_file(f)
    assert [(li.name, p) for li, p in config.served_listeners()] == [("PLAINTEXT", "PLAINTEXT"),
                                                                     ("SASL_SSL", "SASL_SSL"), ("CLIENT", "SSL")]
    assert config.advertised_listeners() == {"SASL_SSL": Listener("SASL_SSL", "example.com", 19093)}


def _run_cli(*args):
    return subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_broker_start_serves_the_listeners_port_and_refuses_a_misspelled_key(tmp_path):
    with socket.socket() as s:  # a free port for listeners=
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    f = tmp_path / "server.properties"
    f.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\n")
    proc = _run_cli("broker", "start", "--config", str(f), "--log-level", "WARNING")
    try:
        assert "listening on 127.0.0.1:%d" % port in proc.stderr.readline()  # the line after start
        with WireClient.connect(f"127.0.0.1:{port}", timeout=5) as c:
            assert c.request(ApiVersionsRequest(), 0).error_code == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err

    f.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\nlog.retention.hour=1\n")
    proc = _run_cli("broker", "start", "--config", str(f))
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert err.splitlines() == ["tidelake: error: bad configuration: server.properties:3: unknown broker config "
                                "'log.retention.hour' (did you mean 'log.retention.hours'?) (tidelake broker start)"]


def test_broker_start_refuses_a_bad_per_listener_security_value_in_one_line(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text(f"log.dirs={tmp_path / 'data'}\nlisteners=SASL_PLAINTEXT://127.0.0.1:0\n"
                 "sasl.enabled.mechanisms=SCRAM-SHA-256\n"
                 "listener.name.sasl_plaintext.sasl.oauthbearer.clock.skew.seconds=soon\n")
    proc = _run_cli("broker", "start", "--config", str(f))
    try:
        _out, err = proc.communicate(timeout=60)
    finally:  # a broker that started after all is stopped here
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert err.splitlines() == ["tidelake: error: bad configuration: server.properties:4: listener.name.sasl_plaintext."
                                "sasl.oauthbearer.clock.skew.seconds='soon' is not a valid number (tidelake broker "
                                "start)"]


def test_every_broker_config_the_broker_reads_is_defined_and_read_without_a_default_of_its_own():
    # the names read as config.get("..."), .get_int("..."), .get_bool("...") (settings. in security/) anywhere
    root = Path(tidelake.__file__).parent
    typed = r'\.get(?:_int|_bool|_list|_string|_optional)?\(\s*"([^"]+)"\s*([,)])'
    reads, security_reads = re.compile(r'\bconfig' + typed), re.compile(r'\b(?:config|settings)' + typed)
    found = {}
    for path in root.rglob("*.py"):
        pattern = security_reads if path.parent.name == "security" else reads
        for name, after in pattern.findall(path.read_text()):
            found.setdefault(name, []).append((path.relative_to(root), after))
    assert len(found) > 30
    assert {n: where for n, where in found.items() if n not in BROKER_CONFIGS} == {}
    assert {n: where for n, where in found.items() if any(after == "," for _p, after in where)} == {}


# the modules that read settings (broker, security, the Spark sources' options, the pipeline's YAML)
SETTINGS_READERS = ["broker/config.py", "broker/config_definitions.py", "broker/config_validation.py", "broker/server.py",
                    "security/*.py", "spark/kafka_*.py", "spark/table_source.py", "spark/pipeline_config.py"]
# .get("name", "literal") / .get("name", 5) / (x.get("name") or "literal"): a second home for a default
LITERAL_DEFAULT = re.compile(r'\.get\(\s*"[^"]+"\s*,\s*(?:"[^"]*"|-?[0-9][0-9_.]*|True|False)\s*\)'
                             r'|(?:\.get|\blookup)\([^()]*\)\s*or\s*(?:"[^"]*"|[0-9]+\b)')


def test_no_setting_is_read_with_a_literal_default_at_its_call_site():
    root = Path(tidelake.__file__).parent
    found = [f"{path.relative_to(root)}:{n}: {line.strip()}" for pattern in SETTINGS_READERS
             for path in sorted(root.glob(pattern)) for n, line in enumerate(path.read_text().splitlines(), 1)
             if LITERAL_DEFAULT.search(line)]
    assert found == []
    # (the scan sees what it looks for)
    for line in ['x = opts.get("failondataloss", "true")', 'n = props.get("x", 20)', 'v = (lookup("a") or "false")',
                 'v = (lookup.get("a") or "false")']:
        assert LITERAL_DEFAULT.search(line), line
    assert not LITERAL_DEFAULT.search('opts.get("endingoffsets", DEFAULTS.ending_offsets)')


def test_controller_and_commit_configs_are_typed_listed_and_refused_when_malformed(tmp_path):
    described = {e.name: e for e in BrokerConfig.from_file(None).describe()}
    for name, default in [("controlled.shutdown.enable", "true"), ("auto.leader.rebalance.enable", "true"),
                          ("leader.imbalance.check.interval.seconds", "300"), ("offsets.commit.timeout.ms", "5000"),
                          ("replica.high.watermark.checkpoint.interval.ms", "5000")]:
        assert (described[name].value, described[name].source) == (default, SOURCE_DEFAULT)
    with pytest.raises(ConfigError, match=r"^--set: controlled\.shutdown\.enable=yes is not a boolean$"):
        BrokerConfig.from_file(None, {"controlled.shutdown.enable": "yes"})
    f = tmp_path / "server.properties"
    f.write_text("num.partitions=2\noffsets.commit.timeout.ms=0\n")
    with pytest.raises(ConfigError, match=r"^server\.properties:2: offsets\.commit\.timeout\.ms=0 is below the minimum"):
        BrokerConfig.from_file(f)
    assert BrokerConfig.from_file(None, {"controlled.shutdown.enable": "FALSE"}).get_bool(
        "controlled.shutdown.enable") is False


def test_get_bool_accepts_only_true_or_false():
    # a value that did not pass through validation (Kafka's rule: not "true" is not the same as false)
    config = BrokerConfig(dynamic={"delete.topic.enable": "yes"})
    with pytest.raises(ConfigError, match=r"^delete\.topic\.enable='yes' is not true or false$"):
        config.get_bool("delete.topic.enable")
    assert BrokerConfig().get_bool("delete.topic.enable") is True


def test_node_id_falls_back_to_its_older_name_broker_id():
    assert BrokerConfig.from_file(None).node_id() == int(BROKER_CONFIGS["node.id"].default)
    assert BrokerConfig.from_file(None, {"broker.id": "7"}).node_id() == 7
    assert BrokerConfig.from_file(None, {"broker.id": "7", "node.id": "3"}).node_id() == 3
