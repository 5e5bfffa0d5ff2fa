"""HTTP basic auth and TLS on the REST listener (the broker's settings style), the registry's own Kafka clients over
SASL_SSL, and the /metrics and /health endpoints."""
from __future__ import annotations

import json

import pytest
import requests
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError

from schema_registry_fixtures import start_registry
from schema_registry_rest import Rest, record
from security_fixtures import PLAIN_JAAS, secured_broker
from tls_certs import make_pki
from tidelake.schema_registry.settings import RegistrySettings, SettingsError

USERS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="b";'
AUTH = {"authentication.method": "BASIC", "authentication.jaas.config": USERS}


def test_basic_auth(registry_broker):
    with start_registry(registry_broker.bootstrap_servers, AUTH) as registry:
        anonymous = Rest(registry.url).get("/subjects")
        assert anonymous.status == 401 and anonymous.body == {"error_code": 401, "message": "Unauthorized"}
        raw = requests.get(f"{registry.url}/subjects", timeout=10)
        assert raw.headers["WWW-Authenticate"] == 'Basic realm="SchemaRegistry"'
        assert Rest(registry.url, auth=("alice", "wrong")).get("/subjects").status == 401
        assert Rest(registry.url, auth=("alice", "alice-secret")).get("/subjects").body == []
        assert Rest(registry.url).get("/health/ready").status == 200          # probes need no credentials
        assert Rest(registry.url).get("/metrics").status == 401
        client = SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "alice:alice-secret"})
        assert client.register_schema("auth-value", Schema(json.dumps(record("A", ("a", "int"))), "AVRO")) == 1
        with pytest.raises(SchemaRegistryError) as refused:
            SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "bob:nope"}).get_subjects()
        assert refused.value.http_status_code == 401


def test_forwarded_writes_carry_the_credentials(registry_broker):
    with start_registry(registry_broker.bootstrap_servers, AUTH) as primary, \
            start_registry(registry_broker.bootstrap_servers, {**AUTH, "leader.eligibility": "false"}) as follower:
        assert follower.election.primary_url() == primary.url
        answer = Rest(follower.url, auth=("bob", "b")).register("fwd-auth", record("F", ("a", "int")))
        assert answer.status == 200, answer


def test_basic_auth_needs_users():
    with pytest.raises(SettingsError, match="authentication.jaas.config"):
        RegistrySettings.load(overrides={"authentication.method": "BASIC"})


def test_tls_listener_and_kafka_over_sasl_ssl(tmp_path):
    pki = make_pki(tmp_path / "pki")
    with secured_broker(tmp_path / "broker", pki, **{"group.initial.rebalance.delay.ms": "0"}) as broker:
        overrides = {
            "listeners": "https://127.0.0.1:0",
            "ssl.keystore.location": str(pki.server_keystore), "ssl.truststore.location": str(pki.ca),
            "kafkastore.bootstrap.servers": broker.bootstrap_for("SASL_SSL"),
            "kafkastore.security.protocol": "SASL_SSL", "kafkastore.sasl.mechanism": "PLAIN",
            "kafkastore.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                           'username="admin" password="admin-secret";',
            "kafkastore.ssl.truststore.location": str(pki.ca),
        }
        assert PLAIN_JAAS
        with start_registry(broker.bootstrap_for("SASL_SSL"), overrides) as registry:
            assert registry.url.startswith("https://127.0.0.1:")
            api = Rest(registry.url, verify=str(pki.ca))
            assert api.register("tls-value", record("T", ("a", "int"))).body == {"id": 1}
            with pytest.raises(requests.exceptions.SSLError):
                requests.get(f"{registry.url}/subjects", timeout=10)    # not trusting the test CA
            client = SchemaRegistryClient({"url": registry.url, "ssl.ca.location": str(pki.ca)})
            assert client.get_subjects() == ["tls-value"]


def test_metrics_and_health(schema_registry):
    api = Rest(schema_registry.url)
    api.register("metrics-value", record("M", ("a", "int")))
    api.register("metrics-value", record("M", ("a", "int"), ("b", "int")))       # refused: no default
    text = requests.get(f"{schema_registry.url}/metrics", timeout=10).text
    assert "tidelake_schema_registry_subjects 1.0" in text
    assert "tidelake_schema_registry_primary 1.0" in text
    assert 'tidelake_schema_registry_registered_total{type="AVRO"} 1.0' in text
    assert "tidelake_schema_registry_incompatible_total 1.0" in text
    live = api.get("/health/live")
    ready = api.get("/health/ready")
    assert live.status == 200 and live.body["status"] == "live"
    assert ready.status == 200 and ready.body["checks"]["primary"]["detail"] == "this process is the primary"
