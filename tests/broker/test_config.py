"""Broker and topic configs: properties files, precedence, synonyms, validation (sans-IO)."""
from __future__ import annotations

import pytest

from tidelake.broker.config import (SOURCE_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_TOPIC, BrokerConfig,
                                    parse_properties, validate_topic_configs)
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
    assert entries["retention.ms"].synonyms[0] == ("log.retention.hours", "3600000", SOURCE_STATIC_BROKER)
    assert entries["retention.ms"].synonyms[-1] == ("log.retention.hours", "604800000", SOURCE_DEFAULT)


def test_topic_config_validation():
    assert validate_topic_configs({"cleanup.policy": "compact, delete"}) == {"cleanup.policy": "compact,delete"}
    for bad in ({"no.such.config": "1"}, {"retention.ms": "abc"}, {"cleanup.policy": "shred"},
                {"message.timestamp.type": "Now"}, {"segment.bytes": "1"}):
        with pytest.raises(InvalidConfig):
            validate_topic_configs(bad)
