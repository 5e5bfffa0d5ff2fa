"""What the admin commands say about brokers a three-broker cluster does not have, or no longer has (real
`tidelake` processes): `partitions reassign --generate` warns of a --broker-list id that is not in the cluster,
`--execute` refuses a move onto one naming it, and `topics describe` right after a broker's kill -9 answers from
what is known, the dead leader's offsets marked unknown instead of librdkafka's -1001."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from conftest import ROOT


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_absent_and_dead_brokers_are_named(cluster, tmp_path):
    bootstrap = cluster.brokers[1].bootstrap
    assert cli("topics", "create", "spread", "--partitions", "3", "--replication-factor", "1",
               "-b", bootstrap).returncode == 0
    produced = cli("produce", "spread", "-b", bootstrap, stdin="".join(f"r{i}\n" for i in range(30)))
    assert produced.returncode == 0, produced.stderr

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "spread"}]}))
    generated = cli("partitions", "reassign", "--generate", "--topics-to-move-json-file", str(topics),
                    "--broker-list", "1,2,9", "-b", bootstrap)
    assert generated.returncode == 0, generated.stderr
    assert ("warning: --broker-list: broker 9 is not in the cluster (live brokers: 1,2,3); --execute refuses a "
            "move onto it") in generated.stderr, generated.stderr

    moves = tmp_path / "moves.json"
    moves.write_text(json.dumps({"version": 1, "partitions": [{"topic": "spread", "partition": 0,
                                                               "replicas": [2, 9]}]}))
    refused = cli("partitions", "reassign", "--execute", "--reassignment-json-file", str(moves), "-b", bootstrap)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert ("reassignment refused: spread-0: broker 9 is not in the cluster (live brokers: 1,2,3)"
            in refused.stderr), refused.stderr

    before = json.loads(cli("topics", "describe", "spread", "--json", "-b", bootstrap).stdout)[0]["partitions"]
    on_3 = {r["partition"] for r in before if r["leader"] == 3}
    assert on_3 and sum(r["high_watermark"] for r in before) == 30, before
    cluster.kill_broker(3)
    after = cli("topics", "describe", "spread", "--json", "-b", bootstrap)
    assert after.returncode == 0, after.stderr
    doc = json.loads(after.stdout)[0]
    # librdkafka asks the controller for configs: when the broker killed was the controller, they are unknown
    assert doc["configs"] is not None or doc["configs_unknown"] == "controller 3 does not answer", doc
    rows = {r["partition"]: r for r in doc["partitions"]}
    for p, r in rows.items():
        if p in on_3:
            assert r["log_start_offset"] is None and r["high_watermark"] is None, r
            assert r["unknown"] in ("no leader", "leader 3 does not answer"), r
        else:
            assert r["unknown"] is None and r["high_watermark"] == before[p]["high_watermark"], r
    table = cli("topics", "describe", "spread", "-b", bootstrap)
    assert table.returncode == 0 and "-1001" not in table.stdout, table.stdout
    assert table.stderr.startswith("offsets unknown (?): spread-"), table.stderr


def test_describe_right_after_the_controllers_kill_marks_configs_unknown(cluster):
    """librdkafka sends DescribeConfigs to the controller: with the controller just killed (ZooKeeper has not yet
    expired its session) `topics describe` answers at once, partitions shown, configs marked unknown.

    ZooKeeper is held stopped (SIGSTOP) from before the kill until both commands have answered: it cannot expire
    the dead controller's session, so no other broker is elected controller while they ask (without the hold, a
    slow machine let a new controller answer the second command)."""
    from confluent_kafka.admin import AdminClient
    bootstrap = cluster.brokers[1].bootstrap
    assert cli("topics", "create", "kept", "--partitions", "2", "--replication-factor", "3",
               "-b", bootstrap).returncode == 0
    controller = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).controller_id
    assert controller in (1, 2, 3), controller
    alive = next(b for i, b in cluster.brokers.items() if i != controller)
    zookeeper = cluster.zookeeper.process.pid
    os.kill(zookeeper, signal.SIGSTOP)
    try:
        cluster.kill_broker(controller)
        described = cli("topics", "describe", "kept", "--json", "-b", alive.bootstrap)
        text = cli("topics", "describe", "kept", "-b", alive.bootstrap)
    finally:
        os.kill(zookeeper, signal.SIGCONT)
    assert described.returncode == 0, described.stderr
    doc = json.loads(described.stdout)[0]
    assert doc["configs"] is None and doc["configs_unknown"] == f"controller {controller} does not answer", doc
    assert [r["partition"] for r in doc["partitions"]] == [0, 1], doc
    assert text.returncode == 0, text.stderr
    assert "configs unknown: controller" in text.stderr, text.stderr
