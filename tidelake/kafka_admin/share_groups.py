"""The share-group (KIP-932) admin requests confluent-kafka 2.16's AdminClient does not send:
ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, encoded with
``tidelake.protocol``'s codecs and sent to the group's coordinator, found first with FindCoordinator.

They go through kafka-python's network client, which negotiates each request's version with the broker and
speaks TLS and SASL as its settings (``kafka_python_config``) ask. Failures raise :class:`ShareAdminError`; each
caller words them for its users (the command line names ``--timeout``, the console shows the line on its page).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from kafka.errors import KafkaError, KafkaTimeoutError, for_code
from kafka.net.compat import KafkaNetClient
from kafka.protocol.metadata import FindCoordinatorRequest

from tidelake.protocol.messages import (AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest,
                                        DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest)

COORDINATOR_RETRY_S = 0.5  # between FindCoordinator lookups while a group has no coordinator

GROUP_KEY_TYPE = 0
FIND_COORDINATOR_MAX_VERSION = 3  # v0-v3 name one key (v4+ batches them)
# errors that go away once a coordinator (the group's, or the share coordinator of __share_group_state) has loaded
# or moved: a request answered only with these is sent again, to the coordinator found anew, until the timeout
_RETRIABLE = {"COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"}
GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"


def _kafka_name(code: int) -> str:
    """Kafka's name of an error code (``GROUP_ID_NOT_FOUND``)."""
    return for_code(code).message


def _error(code: int, message: str | None) -> str:
    """An error of a response: its name, and the broker's message when it gave one."""
    return f"{_kafka_name(code)}: {message}" if message else _kafka_name(code)


class ShareAdminError(RuntimeError):
    """A share-group request failed; the message says which and why."""


class ShareAdminUnreachable(ShareAdminError):
    """No broker answered at the bootstrap servers (or one refused the connection); ``detail`` says why."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class ShareAdminNoAnswer(ShareAdminError):
    """The coordinator did not answer ``what`` within the timeout."""

    def __init__(self, what: str, timeout: float):
        super().__init__(f"{what}: no answer within {timeout:g}s")
        self.what = what


def _raise_partition_errors(what: str, topics) -> None:
    """ShareAdminError naming every partition of a response's topics answered with an error."""
    failed = [f"{t.topic_name}-{p.partition_index}: {_error(p.error_code, p.error_message)}"
              for t in topics for p in t.partitions if p.error_code != 0]
    if failed:
        raise ShareAdminError(f"{what}: {'; '.join(failed)}")


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


class ShareGroupAdmin:
    """Share groups' admin requests, each sent to the group's coordinator. Close it (or use ``with``)."""

    def __init__(self, bootstrap: str, timeout: float, client_id: str,
                 kafka_python_config: Mapping[str, Any]):
        self.timeout = timeout
        self._timeout_ms = max(1, int(timeout * 1000))
        self._coordinators: dict[str, int] = {}
        try:
            self._client = KafkaNetClient(bootstrap_servers=bootstrap, client_id=client_id,
                                          request_timeout_ms=self._timeout_ms, **kafka_python_config)
            self._client.check_version(timeout_ms=self._timeout_ms)
        except KafkaError as e:
            raise ShareAdminUnreachable(str(e)) from e

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "ShareGroupAdmin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(self, node_id: int, request, what: str):
        try:
            return self._client.send_and_receive(node_id, request, timeout_ms=self._timeout_ms)
        except KafkaTimeoutError:
            raise ShareAdminNoAnswer(what, self.timeout) from None
        except KafkaError as e:
            raise ShareAdminError(f"{what}: {type(e).__name__}: {e}") from e

    def coordinator(self, group: str) -> int:
        """The node id of the group's coordinator, asked until the cluster names one or the timeout passes."""
        if group in self._coordinators:
            return self._coordinators[group]
        deadline = time.monotonic() + self.timeout
        while True:
            r = self._send(self._client.least_loaded_node(),
                           FindCoordinatorRequest(key=group, key_type=GROUP_KEY_TYPE,
                                                  max_version=FIND_COORDINATOR_MAX_VERSION),
                           f"cannot find the coordinator of share group {group}")
            if r.error_code == 0:
                self._coordinators[group] = r.node_id
                return r.node_id
            remaining = deadline - time.monotonic()
            if _kafka_name(r.error_code) not in _RETRIABLE or remaining <= 0:
                raise ShareAdminError(f"no coordinator for share group {group}: {_error(r.error_code, r.error_message)}")
            time.sleep(min(COORDINATOR_RETRY_S, remaining))

    def _ask(self, group: str, request, what: str, error_codes: Callable[[Any], Iterable[int]]):
        """``request``'s response from the group's coordinator, sent again while every error in it
        (``error_codes``) is one that passes; the caller reports what is left."""
        deadline = time.monotonic() + self.timeout
        while True:
            r = self._send(self.coordinator(group), request, what)
            names = {_kafka_name(code) for code in error_codes(r) if code != 0}
            remaining = deadline - time.monotonic()
            if not names or not names <= _RETRIABLE or remaining <= 0:
                return r
            self._coordinators.pop(group, None)
            time.sleep(min(COORDINATOR_RETRY_S, remaining))

    def describe(self, group: str) -> ShareGroupDescription | None:
        """The group's state and members; None if there is no share group of that name."""
        what = f"cannot describe share group {group}"
        r = self._ask(group, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), what,
                      lambda r: [g.error_code for g in r.groups])
        [g] = r.groups
        if g.error_code != 0:
            if _kafka_name(g.error_code) == GROUP_ID_NOT_FOUND:
                return None
            raise ShareAdminError(f"{what}: {_error(g.error_code, g.error_message)}")
        members = tuple(ShareMember(m.member_id, m.client_id, m.client_host, m.member_epoch,
                                    tuple(sorted((tp.topic_name, p) for tp in m.assignment.topic_partitions
                                                 for p in tp.partitions)))
                        for m in sorted(g.members, key=lambda m: m.member_id))
        return ShareGroupDescription(g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                                     self.coordinator(group), members)

    def start_offsets(self, group: str) -> list[StartOffset]:
        """Every share-partition the group has a start offset for (DescribeShareGroupOffsets, all topics)."""
        what = f"cannot describe the offsets of share group {group}"
        R = DescribeShareGroupOffsetsRequest
        r = self._ask(group, R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), what,
                      lambda r: [g.error_code for g in r.groups] + [p.error_code for g in r.groups for t in g.topics
                                                                    for p in t.partitions])
        [g] = r.groups
        if g.error_code != 0:
            raise ShareAdminError(f"{what}: {_error(g.error_code, g.error_message)}")
        _raise_partition_errors(what, g.topics)
        return sorted((StartOffset(t.topic_name, p.partition_index, p.start_offset, p.leader_epoch, p.lag)
                       for t in g.topics for p in t.partitions), key=lambda s: (s.topic, s.partition))

    def alter_start_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """Set the start offsets (AlterShareGroupOffsets): the coordinator refuses it while the group has members."""
        what = f"cannot reset offsets of share group {group}"
        A = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
        request = AlterShareGroupOffsetsRequest(group_id=group, topics=[
            A(topic_name=t, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                        for (tt, p), o in sorted(offsets.items()) if tt == t])
            for t in sorted({t for t, _ in offsets})])
        r = self._ask(group, request, what,
                      lambda r: [r.error_code] + [p.error_code for t in r.responses for p in t.partitions])
        if r.error_code != 0:
            raise ShareAdminError(f"{what}: {_error(r.error_code, r.error_message)}")
        _raise_partition_errors(what, r.responses)

    def delete_start_offsets(self, group: str, topics: list[str]) -> dict[str, str | None]:
        """Delete the group's start offsets of whole topics; topic -> its error, None when deleted."""
        what = f"cannot delete offsets of share group {group}"
        D = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
        r = self._ask(group, DeleteShareGroupOffsetsRequest(group_id=group, topics=[D(topic_name=t) for t in topics]),
                      what, lambda r: [r.error_code] + [t.error_code for t in r.responses])
        if r.error_code != 0:
            raise ShareAdminError(f"{what}: {_error(r.error_code, r.error_message)}")
        return {t.topic_name: (_error(t.error_code, t.error_message) if t.error_code else None) for t in r.responses}
