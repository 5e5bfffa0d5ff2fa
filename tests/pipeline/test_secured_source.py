"""The pipeline reads a topic behind SASL_SSL (SCRAM) with ACLs: the YAML's ``security:`` block holds
Kafka client properties (as a client's properties file), turned into the client settings of the
driver's offset lookups, the group commits and the Spark tasks' readers."""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from security_fixtures import ADMIN, add_scram_user, confluent_config, secured_broker
from spark_fixtures import spark  # noqa: F401  (fixture)
from tidelake.spark.pipeline_config import PipelineConfigError
from tidelake.spark.runner import Pipeline
from tidelake.table import Table
from tls_certs import make_pki

pytestmark = pytest.mark.spark

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}


def test_pipeline_reads_a_sasl_ssl_topic_with_acls(spark, tmp_path):  # noqa: F811
    pki = make_pki(tmp_path / "pki")
    with secured_broker(tmp_path / "data", pki, **AUTHORIZER) as b:
        admin_conf = confluent_config(b, pki, ADMIN)
        add_scram_user(b, "etl", "etl-secret", admin_conf)
        admin = AdminClient(admin_conf)
        admin.create_topics([NewTopic("payments", 2, 1)])["payments"].result(30)
        for f in admin.create_acls([
                AclBinding(ResourceType.TOPIC, "payments", ResourcePatternType.LITERAL, "User:etl", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.GROUP, "etl-", ResourcePatternType.PREFIXED, "User:etl", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)]).values():
            f.result(30)
        producer = Producer(admin_conf)
        for i in range(40):
            producer.produce("payments", json.dumps({"id": i, "amount": i}).encode(), partition=i % 2)
        assert producer.flush(30) == 0
        security = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                    "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                        'username="etl" password="etl-secret";',
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
        config = {"source": {"bootstrap_servers": b.bootstrap_for("SASL_SSL"), "topic": "payments",
                             "group_id": "etl-payments", "batch_interval": 0.5},
                  "offsets": "commit-after", "security": security,
                  "sink": {"table": str(tmp_path / "table"), "format": "json", "primary_key": ["id"],
                           "schema": "id long, amount long", "buckets": 2}}
        summary = Pipeline(config, spark=spark).run(once=True)
        assert summary.records == 40
        assert Table.open(str(tmp_path / "table")).scan().num_rows == 40
        # a wrong property name in the block is one clear error, before anything runs
        with pytest.raises(PipelineConfigError, match="unknown client security property 'sasl.jass.config'"):
            Pipeline({**config, "security": {**security, "sasl.jass.config": "x"}}, spark=spark)
