"""Kafka 4.4's kafka-configs (org.apache.kafka.tools.ConfigCommand) describing client quotas, against tidelake and a real
Kafka 4.4 broker: with no quota set, both answer with no entity. (AlterClientQuotas is not served by tidelake yet:
issue 36; this module pins the describe half.)"""
from __future__ import annotations

import subprocess

import pytest

from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker


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
