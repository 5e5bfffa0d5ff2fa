"""Kafka's ZooKeeper layout (ZooKeeper mode): the paths and the JSON of each znode, byte-compatible
with what Kafka's brokers write, so tools that read a Kafka ZooKeeper (zkCli, kafka's own
``zookeeper-shell``) read ours.

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /controller                  (ephemeral)      {"version":1,"brokerid":1,"timestamp":"<ms>"}
    /controller_epoch                             "3"
    /brokers/ids/<id>            (ephemeral)      v5 registration: host, port, endpoints, protocol map;
                                                  its czxid is the broker epoch (KIP-380)
    /brokers/topics/<topic>                       {"version":2,"partitions":{"0":[1,2]},"topic_id":...}
    /brokers/topics/<topic>/partitions/<p>/state  {"version":1,"leader":1,"leader_epoch":0,"isr":[1,2],
                                                   "controller_epoch":3}
    /config/topics/<topic>                        {"version":1,"config":{"min.insync.replicas":"2"}}
    /config/groups/<group, URL-encoded>           {"version":1,"config":{"share.auto.offset.reset":"earliest"}}
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"topics/<topic>"} (or "groups/<group>")
    /admin/delete_topics/<topic>                  (a request to delete, handled by the controller)
    /admin/reassign_partitions                    {"version":1,"partitions":
                                                   [{"topic":..,"partition":..,"replicas":[..]}]}
    /isr_change_notification/isr_change_<seq>     {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /latest_producer_id_block                     {"version":1,"broker":1,"block_start":"0","block_end":"999"}
"""
from __future__ import annotations

import base64
import json
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
# a group's configs (KIP-932's share.* ones): Kafka keeps them only in KRaft's metadata; a ZooKeeper cluster keeps them
# beside the topics' configs, its group id URL-encoded as Kafka's Sanitizer encodes client and user ids
CONFIG_GROUPS = "/config/groups"
GROUP_CONFIG_ENTITY = "groups/"
TOPIC_CONFIG_ENTITY = "topics/"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = CONFIG_CHANGES + "/config_change_"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"  # reassignments written straight to ZooKeeper (pre-KIP-455 tools)
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = ISR_CHANGES + "/isr_change_"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# created at start so watches on their children always have a parent
PERSISTENT_PATHS = ("/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics", "/config/changes",
                    "/config/brokers", "/config/groups", "/admin/delete_topics", "/isr_change_notification")

NO_LEADER = -1
LEADER_DURING_DELETE = -2  # UpdateMetadata's mark of a topic being deleted (Kafka's LeaderDuringDelete)


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def group_config_name(group_id: str) -> str:
    """The group's name under ``/config/groups`` and in a config change's entity path (any group id is a
    znode name then: '/' and the like are percent-encoded)."""
    return urllib.parse.quote(group_id, safe="")


def group_id_of(config_name: str) -> str:
    return urllib.parse.unquote(config_name)


def group_config_path(group_id: str) -> str:
    return f"{CONFIG_GROUPS}/{group_config_name(group_id)}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -- topic ids: Kafka prints a Uuid as URL-safe base64 of its 16 bytes, without padding --------------
def kafka_uuid(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse_kafka_uuid(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


# -- controller --------------------------------------------------------------------------------------
def encode_controller(broker_id: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000))})


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# -- broker registration -----------------------------------------------------------------------------
@dataclass(frozen=True)
class BrokerEndpoint:
    listener: str
    host: str
    port: int
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL

    @property
    def connection_string(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    # the czxid of the znode (KIP-380's broker epoch): each registration, so each restart, has a greater one;
    # not part of the JSON, -1 until the znode is written or read
    epoch: int = -1

    def endpoint(self, listener: str | None = None) -> BrokerEndpoint:
        """The endpoint of ``listener`` (None: the first one)."""
        for ep in self.endpoints:
            if listener is None or ep.listener == listener:
                return ep
        raise KeyError(f"broker {self.broker_id} has no listener {listener}")

    def encode(self) -> bytes:
        """Kafka's v5 registration: the top-level host/port is the first PLAINTEXT endpoint (or null/-1)."""
        plain = next((ep for ep in self.endpoints if ep.protocol == "PLAINTEXT"), None)
        d = {"features": {}, "listener_security_protocol_map": {ep.listener: ep.protocol for ep in self.endpoints},
             "endpoints": [ep.connection_string for ep in self.endpoints], "jmx_port": -1,
             "port": plain.port if plain else -1, "host": plain.host if plain else None,
             "version": 5, "timestamp": str(int(time.time() * 1000))}
        if self.rack is not None:
            d["rack"] = self.rack
        return _dumps(d)

    @classmethod
    def decode(cls, broker_id: int, data: bytes, epoch: int = -1) -> "BrokerRegistration":
        d = json.loads(data)
        protocols = d.get("listener_security_protocol_map") or {}
        endpoints = []
        for conn in d.get("endpoints") or []:
            listener, _, address = conn.partition("://")
            host, _, port = address.rpartition(":")
            endpoints.append(BrokerEndpoint(listener, host.strip("[]"), int(port), protocols.get(listener, listener)))
        if not endpoints and d.get("host"):
            endpoints.append(BrokerEndpoint("PLAINTEXT", d["host"], int(d["port"]), "PLAINTEXT"))
        return cls(broker_id, tuple(endpoints), d.get("rack"), epoch)


# -- topics --------------------------------------------------------------------------------------------
@dataclass
class TopicAssignment:
    """``/brokers/topics/<topic>``: the replicas of each partition (the first is the preferred leader) and, for
    a partition being reassigned (KIP-455), the replicas being added and removed: its replicas are then the
    target's plus the original's, ``adding`` = target - original, ``removing`` = original - target."""
    topic: str
    topic_id: uuid.UUID
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _dumps({"version": 2, "partitions": {str(p): r for p, r in sorted(self.partitions.items())},
                       "adding_replicas": {str(p): r for p, r in sorted(self.adding.items()) if r},
                       "removing_replicas": {str(p): r for p, r in sorted(self.removing.items()) if r},
                       "topic_id": kafka_uuid(self.topic_id)})

    @classmethod
    def decode(cls, topic: str, data: bytes) -> "TopicAssignment":
        d = json.loads(data)
        tid = d.get("topic_id")

        def ids(key: str) -> dict[int, list[int]]:
            return {int(p): [int(b) for b in r] for p, r in (d.get(key) or {}).items()}
        return cls(topic, parse_kafka_uuid(tid) if tid else uuid.UUID(int=0), ids("partitions"),
                   ids("adding_replicas"), ids("removing_replicas"))

    def reassigning(self, partition: int) -> bool:
        return bool(self.adding.get(partition) or self.removing.get(partition))


def encode_entity_config(config: dict[str, str]) -> bytes:
    """A topic's or a group's config znode."""
    return _dumps({"version": 1, "config": dict(config)})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {k: str(v) for k, v in (json.loads(data).get("config") or {}).items()}


@dataclass
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state`` plus the znode's version (what conditional writes check)."""
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1

    def encode(self) -> bytes:
        return _dumps({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                       "leader_epoch": self.leader_epoch, "isr": list(self.isr)})

    @classmethod
    def decode(cls, data: bytes, zk_version: int) -> "PartitionState":
        d = json.loads(data)
        return cls(int(d["leader"]), int(d["leader_epoch"]), [int(b) for b in d["isr"]], int(d["controller_epoch"]),
                   zk_version)


def encode_reassignment(moves: dict[tuple[str, int], list[int]]) -> bytes:
    """``/admin/reassign_partitions``: kafka-reassign-partitions' JSON."""
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                for (t, p), r in sorted(moves.items())]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    return {(e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]]
            for e in (json.loads(data).get("partitions") or [])}


def encode_config_change(entity_path: str) -> bytes:
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    return json.loads(data)["entity_path"]


def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(data: bytes) -> list[tuple[str, int]]:
    return [(e["topic"], int(e["partition"])) for e in json.loads(data).get("partitions", [])]


@dataclass
class ProducerIdBlock:
    broker: int
    block_start: int
    block_end: int  # inclusive

    def encode(self) -> bytes:
        return _dumps({"version": 1, "broker": self.broker, "block_start": str(self.block_start),
                       "block_end": str(self.block_end)})

    @classmethod
    def decode(cls, data: bytes) -> "ProducerIdBlock":
        d = json.loads(data)
        return cls(int(d["broker"]), int(d["block_start"]), int(d["block_end"]))


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return json.loads(data)["id"]


@dataclass
class TopicDescription:
    """A topic as the cluster knows it: assignment, configs, partition states."""
    assignment: TopicAssignment
    configs: dict[str, str] = field(default_factory=dict)
    states: dict[int, PartitionState] = field(default_factory=dict)
