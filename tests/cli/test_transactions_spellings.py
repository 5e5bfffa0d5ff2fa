"""`tidelake transactions describe|abort` take the transactional id either way Kafka's kafka-transactions.sh users
type it: as the argument or as --transactional-id (real `tidelake` processes, a real transactional producer)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from clients import create_topics, running_broker


def tl(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", "transactions", *args, "-b", bootstrap],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with running_broker("tidelake", tmp_path_factory.mktemp("txn-spellings")) as bs:
        create_topics(bs, ["txn-s"], 1)
        yield bs


def open_transaction(bootstrap: str, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-s", b"open", partition=0)
    p.flush(30)
    return p


@pytest.mark.parametrize("spelling", ["argument", "option"])
def test_describe_and_abort_take_the_id_either_way(bootstrap, spelling):
    txn_id = f"spelled-as-{spelling}"
    open_transaction(bootstrap, txn_id)
    as_given = [txn_id] if spelling == "argument" else ["--transactional-id", txn_id]
    described = tl(bootstrap, "describe", *as_given, "--json")
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["state"] == "Ongoing"
    aborted = tl(bootstrap, "abort", *as_given, "--json")
    assert aborted.returncode == 0, aborted.stderr
    assert json.loads(aborted.stdout)["aborted"]["partitions"] == ["txn-s-0"]


def test_the_id_is_needed_once(bootstrap):
    for args, message in [([], "give the transactional id: TRANSACTIONAL_ID or --transactional-id ID"),
                          (["a", "--transactional-id", "b"], "two transactional ids: 'a' and --transactional-id 'b'")]:
        for command in ("describe", "abort"):
            r = tl(bootstrap, command, *args)
            assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
