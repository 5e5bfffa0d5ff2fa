"""Streams groups (KIP-1071) on one broker: Kafka Streams 4.4 with group.protocol=streams (tests/java/StreamsCount.java,
a word count with exactly_once_v2, a repartition topic and a RocksDB store with its changelog), two instances; one
killed with -9 and restarted from its state directory: the last count of every word equals a recount of the input.
The group as the broker's StreamsGroupDescribe / ListGroups / DeleteGroups and Kafka's kafka-streams-groups show it,
and ApiVersions' streams.version."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer
from kafka.protocol.admin import DeleteGroupsRequest, ListGroupsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from conftest import stop_process
from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker
from tidelake.protocol.messages import StreamsGroupDescribeRequest
from txn_helpers import create_topics, raw_request

pytestmark = pytest.mark.java

WORDS = ["kafka", "streams", "tidelake", "exactly", "once", "table"]
APP = "k44-streams-protocol"
# the session timeout bounds how long the tasks of a killed instance wait for their owner to be declared gone
SESSION_TIMEOUT_MS = 8000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("streams-groups") / "data",
                        config={"group.streams.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                "group.streams.heartbeat.interval.ms": "500",
                                "group.streams.num.standby.replicas": "1"}) as b:
        yield b.bootstrap_servers


class StreamsApp:
    def __init__(self, bs: str, state_dir) -> None:
        command = java_command("StreamsCount", bs, APP, "words", "counts", str(state_dir), "streams")
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()

    def output(self) -> str:
        return "".join(self.lines[-60:])


def produce(bs: str, words: list[str]) -> None:
    p = Producer({"bootstrap.servers": bs})
    for i, w in enumerate(words):
        p.produce("words", w.encode(), key=str(i).encode())
    assert p.flush(30) == 0


def committed_counts(bs: str, until: dict[str, int], apps: list[StreamsApp], timeout: float = 240) -> dict[str, int]:
    """The last count per word in `counts` (read_committed), once it equals `until`."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"reader-{time.monotonic_ns()}", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe(["counts"])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + timeout   # a last guard; the wait ends on the counts
    try:
        while latest != until:
            for app in apps:
                assert app.proc.poll() is None, app.output()
            assert time.monotonic() < deadline, (latest, until, *(a.output() for a in apps))
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                latest[m.key().decode()] = struct.unpack(">q", m.value())[0]
    finally:
        c.close()
    return latest


def describe(bs: str):
    request = StreamsGroupDescribeRequest(group_ids=[APP], include_authorized_operations=False)
    return raw_request(bs, request, 0).groups[0]


def wait_for_members(bs: str, n: int, apps: list[StreamsApp], timeout: float = 120):
    """The group's description once it is Stable with ``n`` members, every task active on one of them."""
    deadline = time.monotonic() + timeout
    while True:
        g = describe(bs)
        active = [(t.subtopology_id, p) for m in g.members for t in m.assignment.active_tasks for p in t.partitions]
        if g.group_state == "Stable" and len(g.members) == n and len(active) == len(set(active)) == 8:
            return g
        for app in apps:
            assert app.proc.poll() is None, app.output()
        assert time.monotonic() < deadline, (g, *(a.output() for a in apps))
        time.sleep(0.3)


def streams_groups_tool(bs: str, *commands: list[str]) -> list[tuple[int, str]]:
    """Kafka 4.4's kafka-streams-groups, each command's (exit code, output), all in one JVM
    (tests/java/StreamsGroupsTool.java)."""
    args = [bs]
    for c in commands:
        args += [*c, ";"]
    r = subprocess.run(java_command("StreamsGroupsTool", *args[:-1]), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    out, current = [], []
    for line in r.stdout.splitlines():
        if line.startswith("== exit "):
            out.append((int(line.removeprefix("== exit ")), "\n".join(current)))
        elif line.startswith("== "):
            current = []
        else:
            current.append(line)
    assert len(out) == len(commands), r.stdout + r.stderr
    if any(code for code, _ in out):
        out = [(code, text + ("\n" + r.stderr if code else "")) for code, text in out]
    return out


def rows(output: str) -> list[list[str]]:
    """A tool's table without its header, split into columns."""
    return [line.split() for line in output.splitlines() if line.strip()][1:]


def test_api_versions_serve_streams_groups(broker):
    # v4: below it a feature supported from level 0 is left out, as Kafka leaves it out (KAFKA-17492)
    r = raw_request(broker, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    served = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert served[88] == (0, 1) and served[89] == (0, 1)   # StreamsGroupHeartbeat, StreamsGroupDescribe
    assert {f.name: (f.min_version, f.max_version) for f in r.supported_features}["streams.version"] == (0, 1)
    assert {f.name: (f.min_version_level, f.max_version_level)
            for f in r.finalized_features}["streams.version"] == (1, 1)


def test_two_instances_with_exactly_once_v2_one_killed_and_restarted(broker, tmp_path):
    create_topics(broker, {"words": 4, "counts": 2})
    first = [WORDS[i % len(WORDS)] for i in range(300)]
    produce(broker, first)
    apps = [StreamsApp(broker, tmp_path / "a"), StreamsApp(broker, tmp_path / "b")]
    try:
        assert committed_counts(broker, dict(Counter(first)), apps) == dict(Counter(first))
        g = wait_for_members(broker, 2, apps)
        # two subtopologies (words -> repartition, repartition -> count), 4 tasks each, split 4 and 4; a standby of
        # each stateful task (the count's) on the other instance
        assert sorted(len([p for t in m.assignment.active_tasks for p in t.partitions]) for m in g.members) == [4, 4]
        for m, other in (g.members, g.members[::-1]):
            assert {(t.subtopology_id, p) for t in m.assignment.standby_tasks for p in t.partitions} == \
                {(t.subtopology_id, p) for t in other.assignment.active_tasks for p in t.partitions
                 if t.subtopology_id == "1"}
        subtopologies = {s.subtopology_id: s for s in g.topology.subtopologies}
        assert len(subtopologies) == 2
        changelogs = [t for s in subtopologies.values() for t in s.state_changelog_topics]
        repartitions = [t for s in subtopologies.values() for t in s.repartition_source_topics]
        assert [(t.name, t.partitions) for t in changelogs] == [(f"{APP}-word-counts-changelog", 4)]
        assert len(repartitions) == 1 and repartitions[0].partitions == 4   # the coordinator created both
        listed = raw_request(broker, ListGroupsRequest(states_filter=[], types_filter=["streams"]), 5).groups
        assert [(x.group_id, x.group_type, x.protocol_type) for x in listed] == [(APP, "streams", "streams")]
        # Kafka's own tool reads the group so too
        (c1, listing), (c2, members), (c3, state) = streams_groups_tool(
            broker, ["--list", "--state"], ["--describe", "--group", APP, "--members"],
            ["--describe", "--group", APP, "--state"])
        assert (c1, c2, c3) == (0, 0, 0)
        assert rows(listing) == [[APP, "Stable"]]
        assert [r[0] for r in rows(members)] == [APP, APP] and all("ACTIVE:" in r for r in rows(members))
        assert rows(state)[0][0] == APP and rows(state)[0][-3:] == ["sticky", "Stable", "2"]

        os.kill(apps[0].proc.pid, signal.SIGKILL)          # perhaps inside a transaction
        apps[0].proc.wait(30)
        second = [WORDS[(i * 7) % len(WORDS)] for i in range(200)]
        produce(broker, second)
        apps[0] = StreamsApp(broker, tmp_path / "a")        # the same state directory: RocksDB and the checkpoint
        expected = dict(Counter(first + second))
        assert committed_counts(broker, expected, apps) == expected
        wait_for_members(broker, 2, apps)                   # the killed member expired, the restarted one in
    finally:
        for app in apps:
            stop_process(app.proc)
    # both left (close() sends epoch -1): the group is empty; Kafka's tool resets its offsets and deletes it
    assert describe(broker).group_state == "Empty"
    (c1, reset), (c2, deleted), (c3, listing) = streams_groups_tool(
        broker, ["--reset-offsets", "--group", APP, "--all-input-topics", "--to-earliest", "--execute"],
        ["--delete", "--group", APP], ["--list"])
    assert (c1, c2, c3) == (0, 0, 0), (reset, deleted, listing)
    assert sorted(r[1:] for r in rows(reset)) == [["words", "0", "0"], ["words", "1", "0"], ["words", "2", "0"],
                                                  ["words", "3", "0"]]
    assert "was successful" in deleted and listing.strip() == ""
    assert describe(broker).error_code == 69   # GROUP_ID_NOT_FOUND
    r = raw_request(broker, DeleteGroupsRequest(groups_names=[APP]), 2)
    assert [(x.group_id, x.error_code) for x in r.results] == [(APP, 69)]

