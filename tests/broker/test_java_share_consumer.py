"""Kafka 4.4's own KafkaShareConsumer (tests/java/ShareClient.java) against the broker's share groups (KIP-932):
explicit acknowledgement (ACCEPT, a RELEASE that comes back with delivery count 2, REJECT: never again),
implicit acknowledgement (every record once), and a member that dies holding records: another gets them again."""
from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_peer import java_command
from tidelake.broker import EmbeddedBroker

pytestmark = pytest.mark.java

N = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-java") / "data") as b:
        yield b.bootstrap_servers


def create(bs: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)


def share_run(bs: str, group: str, topic: str, mode: str, produce: int = N) -> list[tuple[str, int, str]]:
    """ShareClient writes `produce` records, then reads in `group` until N are settled (crash: one poll)."""
    r = subprocess.run(java_command("ShareClient", bs, group, topic, str(produce), str(N), mode),
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and r.stdout.endswith("done\n"), r.stdout[-2000:] + r.stderr[-3000:]
    return [(v, int(c), ack) for _, v, c, ack in (line.split() for line in r.stdout.splitlines()[:-1])]


def test_explicit_acks_accept_release_and_reject(broker):
    create(broker, "share-explicit")
    got = share_run(broker, "share-explicit", "share-explicit", "explicit")
    released = {f"v{i}" for i in range(N) if i % 3 == 0}
    rejected = {f"v{i}" for i in range(N) if i % 5 == 1 and i % 3 != 0}
    firsts = [(v, ack) for v, c, ack in got if c == 1]
    assert sorted(v for v, _ in firsts) == sorted(f"v{i}" for i in range(N))    # every record delivered once first
    assert {v for v, ack in firsts if ack == "RELEASE"} == released
    assert {v for v, ack in firsts if ack == "REJECT"} == rejected
    again = [(v, c, ack) for v, c, ack in got if c != 1]
    assert sorted(v for v, _, _ in again) == sorted(released)   # only the released come back, once each
    assert all(c == 2 and ack == "ACCEPT" for _, c, ack in again), again


def test_implicit_acks_deliver_every_record_once(broker):
    create(broker, "share-implicit")
    got = share_run(broker, "share-implicit", "share-implicit", "implicit")
    assert sorted(v for v, _, _ in got) == sorted(f"v{i}" for i in range(N))
    assert all(c == 1 for _, c, _ in got), got


def test_a_dead_members_records_go_to_another_member(broker):
    create(broker, "share-crash")
    held = [v for v, _, _ in share_run(broker, "share-crash", "share-crash", "crash")]   # halted, nothing acked
    assert held
    got = share_run(broker, "share-crash", "share-crash", "implicit", produce=0)
    assert sorted(v for v, _, _ in got) == sorted(f"v{i}" for i in range(N))
    assert {v for v, c, _ in got if c == 2} == set(held) and all(c == 1 for v, c, _ in got if v not in held), got
