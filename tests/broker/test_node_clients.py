"""Node.js client families against the broker: KafkaJS 2.2.4 and @platformatic/kafka (tests/node, installed by
`make test` with `npm ci`). Each script produces, consumes in a group committing by hand (a second member resumes
from the commits), commits offsets inside a transaction, commits and aborts transactions, and reads the result
back read_committed; it prints one JSON line. Both also log in with SASL PLAIN and OAUTHBEARER and
re-authenticate (KIP-368)."""
from __future__ import annotations

import json
import logging
import subprocess

import pytest

from conftest import ROOT
from tidelake.broker import EmbeddedBroker

NODE_DIR = ROOT / "tests" / "node"


def run_node_client(script: str, bootstrap: str, *args: str) -> dict:
    if not (NODE_DIR / "node_modules").is_dir():
        pytest.fail(f"{NODE_DIR}/node_modules is missing: run `make node-deps` (npm ci in {NODE_DIR})")
    r = subprocess.run(["node", script, bootstrap, *args], cwd=NODE_DIR, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_kafkajs_produce_group_commit_and_transactions(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        out = run_node_client("kafkajs_roundtrip.js", b.bootstrap_servers)
    assert (out["first"], out["firstDistinct"], out["committedFirst"]) == (30, 30, 30)
    assert out["second"] == [f"w{i}" for i in range(10)]  # the second member starts at the commits
    assert out["committedSecond"] == 40
    assert out["readCommitted"] == ["c0", "c1", "c2", "c3", "c4", "end"]  # the aborted a0..a2 are not read
    assert out["txnOffset"] == "7"  # sendOffsets committed with the transaction


def test_platformatic_produce_groups_commit_and_transactions(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as b:
        out = run_node_client("platformatic_roundtrip.mjs", b.bootstrap_servers)
    assert (out["first"], out["firstDistinct"], out["committedFirst"]) == (30, 30, 30)
    assert out["second"] == [f"w{i}" for i in range(10)]
    assert out["committedSecond"] == 40
    assert out["consumerProtocol"] == 40  # the KIP-848 group reads all 40 from the start
    assert out["readCommitted"] == ["c"] * 5 + ["e"]  # the aborted transaction's record is not read
    assert out["txnCommitted"] == 5  # the committed transactions' input offsets, not the aborted one's


PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";')
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
              "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
              "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
              "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
              "connections.max.reauth.ms": "1500"}
    with EmbeddedBroker(tmp_path_factory.mktemp("node-sasl"), config=config) as b:
        yield b


@pytest.mark.parametrize("script, topic", [("kafkajs_sasl.js", "js-sasl"), ("platformatic_sasl.mjs", "pf-sasl")])
@pytest.mark.parametrize("mechanism", ["plain", "oauthbearer"])
def test_node_clients_log_in_with_sasl_and_reauthenticate(sasl_broker, caplog, script, topic, mechanism):
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.sasl")
    caplog.set_level(logging.DEBUG, logger="tidelake.broker.transport")  # (the handler takes the last level)
    out = run_node_client(script, sasl_broker.bootstrap_servers, mechanism, "3000")
    log = sasl_broker.broker.logs.get(f"{topic}-{mechanism}", 0)
    assert out["sent"] > 0 and log is not None and log.log_end_offset == out["sent"]
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"re-authenticated as User:alice with {mechanism.upper()}" in m for m in messages)
    assert not any("expired without re-authentication" in m for m in messages)
