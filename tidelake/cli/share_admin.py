"""The share-group (KIP-932) admin requests confluent-kafka 2.16's AdminClient does not send:
ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, encoded with
``tidelake.protocol``'s codecs and sent to the group's coordinator, found first with FindCoordinator.

The requests go over a plain TCP connection (``WireClient``): a ``--command-config`` asking for TLS or SASL is
refused with one line rather than sent in the clear.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from kafka.errors import for_code
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from tidelake.cli.errors import CliError
from tidelake.cli.kafka_client import COORDINATOR_RETRY_S, BrokerConnection
from tidelake.protocol.messages import (AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
                                        DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
                                        DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
                                        ShareGroupDescribeRequest, ShareGroupDescribeResponse)
from tidelake.protocol.wire_client import WireClient
from tidelake.security.client_config import DEFAULT_PROTOCOL, librdkafka_config

# the versions sent: Kafka 4.2's (DescribeShareGroupOffsets v1 carries the lag)
FIND_COORDINATOR_VERSION = 3
SHARE_GROUP_DESCRIBE_VERSION = 1
DESCRIBE_OFFSETS_VERSION = 1
ALTER_OFFSETS_VERSION = 0
DELETE_OFFSETS_VERSION = 0
GROUP_KEY_TYPE = 0
# FindCoordinator errors that go away once the coordinator has loaded: asked again until --timeout
_RETRIABLE = {"COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"}
GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"


def _kafka_name(code: int) -> str:
    """Kafka's name of an error code (``GROUP_ID_NOT_FOUND``)."""
    return for_code(code).message


def _error(code: int, message: str | None) -> str:
    """An error of a response: its name, and the broker's message when it gave one."""
    return f"{_kafka_name(code)}: {message}" if message else _kafka_name(code)


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: tuple[tuple[str, int], ...]  # (topic, partition), sorted


@dataclass(frozen=True)
class ShareGroupDescription:
    group: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator: int
    members: tuple[ShareMember, ...]


@dataclass(frozen=True)
class StartOffset:
    """A share-partition's start offset (SPSO) as the group coordinator keeps it, and its lag."""
    topic: str
    partition: int
    start_offset: int
    leader_epoch: int
    lag: int


@dataclass(frozen=True)
class Coordinator:
    node_id: int
    host: str
    port: int


class ShareGroupAdmin:
    """One share group's admin requests, each on a connection to the group's coordinator."""

    def __init__(self, conn: BrokerConnection, group: str):
        protocol = librdkafka_config(conn.security)["security.protocol"]
        if protocol != DEFAULT_PROTOCOL:
            raise CliError(f"share-group requests are sent over PLAINTEXT only; --command-config asks for "
                           f"security.protocol={protocol}")
        self.conn = conn
        self.group = group
        self._coordinator: Coordinator | None = None

    def _connect(self, host: str, port: int) -> WireClient:
        try:
            return WireClient(host, port, timeout=self.conn.timeout, client_id="tidelake-cli")
        except OSError as e:
            raise self.conn.unreachable(str(e)) from None

    def _request(self, client: WireClient, request, version: int, response_cls, what: str):
        try:
            return client.request(request, version, response_cls)
        except TimeoutError:
            raise CliError(f"{what}: no answer within {self.conn.timeout:g}s (--timeout)") from None
        except OSError as e:
            raise CliError(f"{what}: {e}") from None

    def coordinator(self) -> Coordinator:
        """The group's coordinator, asked of the bootstrap broker until it names one or --timeout passes."""
        if self._coordinator is not None:
            return self._coordinator
        host, _, port = self.conn.bootstrap.split(",")[0].rpartition(":")
        deadline = time.monotonic() + self.conn.timeout
        with self._connect(host, int(port)) as client:
            while True:
                r = self._request(client, FindCoordinatorRequest(key=self.group, key_type=GROUP_KEY_TYPE),
                                  FIND_COORDINATOR_VERSION, FindCoordinatorResponse,
                                  f"cannot find the coordinator of share group {self.group}")
                if r.error_code == 0:
                    self._coordinator = Coordinator(r.node_id, r.host, r.port)
                    return self._coordinator
                reason = _error(r.error_code, r.error_message)
                remaining = deadline - time.monotonic()
                if _kafka_name(r.error_code) not in _RETRIABLE or remaining <= 0:
                    raise CliError(f"no coordinator for share group {self.group}: {reason}")
                time.sleep(min(COORDINATOR_RETRY_S, remaining))

    def _at_coordinator(self, request, version: int, response_cls, what: str):
        c = self.coordinator()
        with self._connect(c.host, c.port) as client:
            return self._request(client, request, version, response_cls, what)

    def describe(self) -> ShareGroupDescription | None:
        """The group's state and members; None if there is no share group of that name."""
        what = f"cannot describe share group {self.group}"
        r = self._at_coordinator(ShareGroupDescribeRequest(group_ids=[self.group], include_authorized_operations=False),
                                 SHARE_GROUP_DESCRIBE_VERSION, ShareGroupDescribeResponse, what)
        [g] = r.groups
        if g.error_code != 0:
            if _kafka_name(g.error_code) == GROUP_ID_NOT_FOUND:
                return None
            raise CliError(f"{what}: {_error(g.error_code, g.error_message)}")
        members = tuple(ShareMember(m.member_id, m.client_id, m.client_host, m.member_epoch,
                                    tuple(sorted((tp.topic_name, p) for tp in m.assignment.topic_partitions
                                                 for p in tp.partitions)))
                        for m in sorted(g.members, key=lambda m: m.member_id))
        return ShareGroupDescription(g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                                     self.coordinator().node_id, members)

    def start_offsets(self) -> list[StartOffset]:
        """Every share-partition the group has a start offset for (DescribeShareGroupOffsets, all topics)."""
        what = f"cannot describe the offsets of share group {self.group}"
        R = DescribeShareGroupOffsetsRequest
        r = self._at_coordinator(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=self.group, topics=None)]),
                                 DESCRIBE_OFFSETS_VERSION, DescribeShareGroupOffsetsResponse, what)
        [g] = r.groups
        if g.error_code != 0:
            raise CliError(f"{what}: {_error(g.error_code, g.error_message)}")
        failed = [f"{t.topic_name}-{p.partition_index}: {_kafka_name(p.error_code)}"
                  for t in g.topics for p in t.partitions if p.error_code != 0]
        if failed:
            raise CliError(f"{what}: {'; '.join(failed)}")
        return sorted((StartOffset(t.topic_name, p.partition_index, p.start_offset, p.leader_epoch, p.lag)
                       for t in g.topics for p in t.partitions), key=lambda s: (s.topic, s.partition))

    def alter_start_offsets(self, offsets: dict[tuple[str, int], int]) -> None:
        """Set the start offsets (AlterShareGroupOffsets): the coordinator refuses it while the group has members."""
        what = f"cannot reset offsets of share group {self.group}"
        A = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
        topics = sorted({t for t, _ in offsets})
        request = AlterShareGroupOffsetsRequest(group_id=self.group, topics=[
            A(topic_name=t, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                        for (tt, p), o in sorted(offsets.items()) if tt == t]) for t in topics])
        r = self._at_coordinator(request, ALTER_OFFSETS_VERSION, AlterShareGroupOffsetsResponse, what)
        if r.error_code != 0:
            raise CliError(f"{what}: {_error(r.error_code, r.error_message)}")
        failed = [f"{t.topic_name}-{p.partition_index}: {_kafka_name(p.error_code)}"
                  for t in r.responses for p in t.partitions if p.error_code != 0]
        if failed:
            raise CliError(f"{what}: {'; '.join(failed)}")

    def delete_start_offsets(self, topics: list[str]) -> dict[str, str | None]:
        """Delete the group's start offsets of whole topics; topic -> the error's name, None when deleted."""
        what = f"cannot delete offsets of share group {self.group}"
        D = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
        r = self._at_coordinator(DeleteShareGroupOffsetsRequest(group_id=self.group,
                                                                topics=[D(topic_name=t) for t in topics]),
                                 DELETE_OFFSETS_VERSION, DeleteShareGroupOffsetsResponse, what)
        if r.error_code != 0:
            raise CliError(f"{what}: {_error(r.error_code, r.error_message)}")
        return {t.topic_name: (_kafka_name(t.error_code) if t.error_code else None) for t in r.responses}
