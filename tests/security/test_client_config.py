"""Kafka client security properties -> librdkafka and kafka-python settings (``--command-config``, the
pipeline's ``security:`` block, Spark's ``kafka.*`` options)."""
from __future__ import annotations

import base64
import json

import pytest

from tidelake.security.client_config import (ClientConfigError, kafka_python_config, librdkafka_config,
                                             parse_client_properties, with_librdkafka_security)
from tidelake.spark.kafka_options import KafkaSourceError, KafkaSourceOptions
from tidelake.spark.pipeline_config import PipelineConfig, PipelineConfigError

SCRAM = ('security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n'
         'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
         'password="p w";\nssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n# comment\n')


def test_kafka_properties_to_librdkafka_and_kafka_python():
    props = parse_client_properties(SCRAM)
    assert librdkafka_config(props) == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                        "sasl.username": "u", "sasl.password": "p w", "ssl.ca.location": "/ca.pem"}
    assert kafka_python_config(props) == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                          "sasl_plain_username": "u", "sasl_plain_password": "p w",
                                          "ssl_cafile": "/ca.pem"}
    mtls = {"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/me.pem",
            "ssl.endpoint.identification.algorithm": ""}
    assert librdkafka_config(mtls) == {"security.protocol": "SSL", "ssl.certificate.location": "/me.pem",
                                       "ssl.key.location": "/me.pem", "ssl.endpoint.identification.algorithm": "none"}
    for bad, message in [({"security.protocol": "KERBEROS"}, "expected one of"),
                         ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI"),
                         ({"ssl.truststore.locaton": "x"}, "unknown client security property"),
                         ({"security.protocol": "SASL_PLAINTEXT"}, "needs sasl.jaas.config")]:
        with pytest.raises(ClientConfigError, match=message):
            librdkafka_config(bad)
    # other librdkafka settings are left alone
    assert with_librdkafka_security({"fetch.max.bytes": 5}) == {"fetch.max.bytes": 5}


def test_spark_kafka_options_and_pipeline_security_block():
    props = parse_client_properties(SCRAM)
    options = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", **{f"kafka.{k}": v for k, v in props.items()}}
    config = KafkaSourceOptions.parse(options, streaming=False).client_config
    assert config["sasl.username"] == "u" and config["ssl.ca.location"] == "/ca.pem" and "sasl.jaas.config" not in config
    with pytest.raises(KafkaSourceError, match="kafka.. security options"):
        KafkaSourceOptions.parse({**options, "kafka.sasl.jaas.config": "nonsense"}, streaming=False)
    raw = {"source": {"bootstrap_servers": "h:1", "topic": "t", "group_id": "g", "kafka": {"client.id": "me"}},
           "sink": {"table": "t", "primary_key": "id", "schema": "id long"}, "security": props}
    assert PipelineConfig.from_dict(raw).source.kafka == {"client.id": "me", **librdkafka_config(props)}
    with pytest.raises(PipelineConfigError, match="security: unknown client security property"):
        PipelineConfig.from_dict({**raw, "security": {"sasl.jass.config": "x"}})


OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


def test_oauthbearer_properties_to_librdkafka():
    unsecured = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                 "sasl.jaas.config": f'{OAUTH} unsecuredLoginStringClaim_sub="alice" '
                                     'unsecuredLoginLifetimeSeconds="60" unsecuredLoginListClaim_scope=",kafka,read";'}
    assert librdkafka_config(unsecured) == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": "principal=alice lifeSeconds=60 scope=kafka,read"}
    oidc = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.jaas.config": f'{OAUTH} clientId="app" clientSecret="s3" scope="kafka";'}
    assert librdkafka_config(oidc) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": "s3", "sasl.oauthbearer.scope": "kafka"}
    for bad, message in [({**unsecured, "sasl.jaas.config": f"{OAUTH};"}, "unsecuredLoginStringClaim_sub"),
                         ({**oidc, "sasl.jaas.config": f'{OAUTH} clientId="app";'}, "clientSecret are required"),
                         ({**unsecured, "sasl.jaas.config": 'x.PlainLoginModule required username="a" password="b";'},
                          "needs sasl.jaas.config=org.apache.kafka.common.security.oauthbearer")]:
        with pytest.raises(ClientConfigError, match=message):
            librdkafka_config(bad)
    kp = kafka_python_config(unsecured)  # kafka-python: Kafka's unsecured token, made by a token provider
    header, claims, signature = kp["sasl_oauth_token_provider"].token().split(".")
    decoded = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert (kp["sasl_mechanism"], json.loads(base64.urlsafe_b64decode(header + "==")), signature) == (
        "OAUTHBEARER", {"alg": "none"}, "")
    assert (decoded["sub"], decoded["scope"], decoded["exp"] - decoded["iat"]) == ("alice", ["kafka", "read"], 60)
    with pytest.raises(ClientConfigError, match="take only unsecured OAUTHBEARER tokens"):
        kafka_python_config(oidc)
