"""What the admin commands say about brokers a three-broker cluster does not have, or no longer has (real
`tidelake` processes): `partitions reassign --generate` warns of a --broker-list id that is not in the cluster,
`--execute` refuses a move onto one naming it, and `topics describe` right after a broker's kill -9 answers from
what is known, the dead leader's offsets marked unknown instead of librdkafka's -1001."""
from __future__ import annotations

import json
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
    rows = {r["partition"]: r for r in json.loads(after.stdout)[0]["partitions"]}
    for p, r in rows.items():
        if p in on_3:
            assert r["log_start_offset"] is None and r["high_watermark"] is None, r
            assert r["unknown"] in ("no leader", "leader 3 does not answer"), r
        else:
            assert r["unknown"] is None and r["high_watermark"] == before[p]["high_watermark"], r
    table = cli("topics", "describe", "spread", "-b", bootstrap)
    assert table.returncode == 0 and "-1001" not in table.stdout, table.stdout
    assert table.stderr.startswith("offsets unknown (?): spread-"), table.stderr
