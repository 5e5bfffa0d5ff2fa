"""Partition reassignment (KIP-455) on three real brokers: `tidelake partitions reassign` (Kafka's
kafka-reassign-partitions JSON) moves a partition while an idempotent acks=all producer writes to it, the
topic znode records adding/removing replicas in Kafka's keys, the controller alone answers, a cancellation
reverts; every acknowledged record is read back once."""
from __future__ import annotations

import json
import os
import signal
import threading

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from kazoo.client import KazooClient

from cluster_fixtures import consume_all, metadata, start_cluster, wait_until
from cluster_fixtures import produce as produce_n
from metrics_scrape import scrape, value
from tidelake import errors
from tidelake.cli.main import cli
from tidelake.protocol.wire_client import WireClient

_ATopic = AlterPartitionReassignmentsRequest.ReassignableTopic
_APartition = _ATopic.ReassignablePartition


def _zk_json(cluster, path: str) -> dict:
    client = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    client.start(10)
    try:
        return json.loads(client.get(path)[0])
    finally:
        client.stop()
        client.close()


def _create(cluster, name: str, assignment: list[list[int]], **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=configs)
    for f in admin.create_topics([new], request_timeout=20).values():
        f.result(30)
    wait_until(f"every broker to know the leaders of {name}", lambda: all(
        all(p.leader_id > 0 for p in metadata(b, [name]).topics[0].partitions) and
        len(metadata(b, [name]).topics[0].partitions) == len(assignment) for b in cluster.brokers.values()))


def _partition(cluster, broker_id: int, topic: str, p: int):
    (t,) = metadata(cluster.brokers[broker_id], [topic]).topics
    return next(x for x in t.partitions if x.partition_index == p)


def _reassign(cluster, tmp_path, flag: str, moves: list[dict], bootstrap: str | None = None) -> str:
    f = tmp_path / "reassign.json"
    f.write_text(json.dumps({"version": 1, "partitions": moves}))
    r = CliRunner().invoke(cli, ["partitions", "reassign", "-b", bootstrap or cluster.bootstrap_servers,
                                 "--timeout", "20",
                                 "--reassignment-json-file", str(f), flag])
    assert r.exit_code == 0, r.output
    return r.output


def _alter(broker, topic: str, p: int, replicas):
    req = AlterPartitionReassignmentsRequest(timeout_ms=10000, topics=[
        _ATopic(name=topic, partitions=[_APartition(partition_index=p, replicas=replicas)])])
    with WireClient("127.0.0.1", broker.port) as c:
        return c.request(req, 0)


def _list(broker, topic: str | None = None):
    topics = None if topic is None else [ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
        name=topic, partition_indexes=[0])]
    with WireClient("127.0.0.1", broker.port) as c:
        return c.request(ListPartitionReassignmentsRequest(timeout_ms=10000, topics=topics), 0)


def test_reassigning_a_partition_under_load_moves_it_and_loses_no_acknowledged_record(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3)
    try:
        # partition 0 on brokers 1 and 2, led by 1; it moves to 3 and 2: the leadership moves to broker 3, which had
        # no copy before (its producer state comes from the replicated log: the idempotent producer goes on)
        _create(cluster, "moving", [[1, 2]], **{"min.insync.replicas": "2"})
        acked: dict[int, bytes] = {}
        failures = []
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                          "enable.idempotence": True, "linger.ms": 2})

            def on_delivery(err, m):
                if err is None:
                    acked[m.offset()] = m.value()
                else:
                    failures.append(err)
            i = 0
            while not stop.is_set() or i < 2000:
                p.produce("moving", value=b"v-%07d" % i, partition=0, on_delivery=on_delivery)
                p.poll(0)
                i += 1
                if i % 200 == 0:
                    p.flush(30)
            failures.append(None) if p.flush(60) else None
        writer = threading.Thread(target=produce)
        writer.start()
        try:
            wait_until("some records acknowledged before the move", lambda: len(acked) > 500, 60)
            out = _reassign(cluster, tmp_path, "--execute", [{"topic": "moving", "partition": 0, "replicas": [3, 2]}])
            assert "Current partition replica assignment" in out
            assert '{"topic":"moving","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}' in out
            assert "Successfully started partition reassignment for moving-0" in out

            def done():
                return "Reassignment of partition moving-0 is completed." in _reassign(
                    cluster, tmp_path, "--verify", [{"topic": "moving", "partition": 0, "replicas": [3, 2]}])
            wait_until("the reassignment to complete", done, 60)
            settled = len(acked)
            wait_until("more records acknowledged after the move", lambda: len(acked) > settled + 500, 60)
        finally:
            stop.set()
            writer.join(120)
        assert not writer.is_alive()
        assert failures == [], failures[:3]

        node = _zk_json(cluster, "/brokers/topics/moving")
        assert node["partitions"] == {"0": [3, 2]}
        assert node["adding_replicas"] == {} and node["removing_replicas"] == {}
        state = _zk_json(cluster, "/brokers/topics/moving/partitions/0/state")
        assert state["leader"] == 3 and sorted(state["isr"]) == [2, 3]
        for b in cluster.brokers:
            wait_until(f"broker {b} to show replicas [2, 3]", lambda b=b: sorted(
                _partition(cluster, b, "moving", 0).replica_nodes) == [2, 3])
        wait_until("broker 1 to delete its replica", lambda: not (cluster.brokers[1].data_dir / "moving-0").exists())
        assert (cluster.brokers[3].data_dir / "moving-0").exists()

        records = consume_all(cluster, "moving", 1, len(acked))
        offsets = [o for _p, o, _v in records]
        assert len(offsets) == len(set(offsets))  # read once each
        values = [v for _p, _o, v in records]
        assert len(values) == len(set(values)), "a record was stored twice"
        by_offset = {o: v for _p, o, v in records}
        missing = [o for o in acked if by_offset.get(o) != acked[o]]
        assert missing == [], f"{len(missing)} acknowledged records lost or changed, e.g. offset {missing[:3]}"
    finally:
        cluster.stop()


def test_only_the_controller_reassigns_and_a_cancel_reverts_to_the_original_replicas(tmp_path):
    # a long ZooKeeper session: the broker paused below stays registered (alive) for the whole test
    cluster = start_cluster(tmp_path / "c", 3, metrics=True, **{"zookeeper.session.timeout.ms": "30000"})
    try:
        controller = metadata(cluster.brokers[1]).controller_id
        other, paused = [b for b in (1, 2, 3) if b != controller]
        _create(cluster, "stay", [[controller, other]])
        leader_url = cluster.brokers[controller].metrics_url
        elections = value(scrape(leader_url), "tidelake_leader_elections_total")
        # a non-controller refuses, as Kafka 2.4+ does in ZooKeeper mode (the admin client retries at the controller)
        r = _alter(cluster.brokers[other], "stay", 0, [other, paused])
        assert r.error_code == errors.NotController.code
        assert _list(cluster.brokers[other]).error_code == errors.NotController.code

        # what the controller refuses
        r = _alter(cluster.brokers[controller], "stay", 0, [other, 99])
        assert r.responses[0].partitions[0].error_code == errors.InvalidReplicaAssignment.code
        assert "99" in r.responses[0].partitions[0].error_message
        assert _alter(cluster.brokers[controller], "stay", 0, None).responses[0].partitions[0].error_code == \
            errors.NoReassignmentInProgress.code
        assert _alter(cluster.brokers[controller], "absent", 0, [1]).responses[0].partitions[0].error_code == \
            errors.UnknownTopicOrPartition.code

        # the broker to add cannot fetch while paused: the reassignment stays in progress
        os.kill(cluster.brokers[paused].pid, signal.SIGSTOP)
        try:
            r = _alter(cluster.brokers[controller], "stay", 0, [other, paused])
            assert r.error_code == 0 and r.responses[0].partitions[0].error_code == errors.NONE
            node = _zk_json(cluster, "/brokers/topics/stay")
            assert node["partitions"] == {"0": [other, paused, controller]}
            assert node["adding_replicas"] == {"0": [paused]} and node["removing_replicas"] == {"0": [controller]}
            (t,) = _list(cluster.brokers[controller]).topics
            (p,) = t.partitions
            assert (t.name, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)) == \
                ("stay", [other, paused, controller], [paused], [controller])
            assert sorted(_partition(cluster, other, "stay", 0).replica_nodes) == [1, 2, 3]
            # the leader took the new replica set (a new epoch): with the original two replicas in sync the
            # partition is not under-replicated, though one of its three replicas is not in the ISR (as in Kafka)
            during = wait_until("the leader to take the new epoch", lambda: (
                m := scrape(leader_url), value(m, "tidelake_leader_elections_total") > elections and m)[1])
            assert value(during, "tidelake_under_replicated_partitions") == 0
            r = CliRunner().invoke(cli, ["cluster", "status", "--zookeeper", cluster.zookeeper.connect_string,
                                         "--json"])
            assert r.exit_code == 0, r.output
            (row,) = json.loads(r.output)["reassigning"]
            assert (row["topic"], row["partition"], row["adding"], row["removing"]) == \
                ("stay", 0, [paused], [controller])

            # (a raw request: an admin client may pick the paused broker for its metadata and wait for it)
            r = _alter(cluster.brokers[controller], "stay", 0, None)
            assert r.responses[0].partitions[0].error_code == errors.NONE
            node = _zk_json(cluster, "/brokers/topics/stay")
            # the original replicas are RS minus the adding ones, in RS's order (as in Kafka: the znode keeps no
            # other record of the original order)
            assert node["partitions"] == {"0": [other, controller]}
            assert node["adding_replicas"] == {} and node["removing_replicas"] == {}
            assert _list(cluster.brokers[controller]).topics == []
        finally:
            os.kill(cluster.brokers[paused].pid, signal.SIGCONT)
        state = _zk_json(cluster, "/brokers/topics/stay/partitions/0/state")
        assert state["leader"] in (controller, other) and sorted(state["isr"]) == sorted([controller, other])
        wait_until("the paused broker to drop the replica it was to get",
                   lambda: not (cluster.brokers[paused].data_dir / "stay-0").exists())
        out = _reassign(cluster, tmp_path, "--cancel", [{"topic": "stay", "partition": 0, "replicas": [other, paused]}])
        assert "None of the specified partition reassignments are active." in out
        out = _reassign(cluster, tmp_path, "--verify", [{"topic": "stay", "partition": 0, "replicas": [other, paused]}])
        assert f"There is no active reassignment of partition stay-0, but replica set is {other},{controller} " \
               f"rather than {other},{paused}." in out
    finally:
        cluster.stop()


def test_the_replication_factor_grows_and_shrinks_unless_the_request_forbids_it(cluster):
    _create(cluster, "grow", [[1]])
    acked = produce_n(cluster, "grow", 500)
    controller = cluster.brokers[metadata(cluster.brokers[1]).controller_id]
    req = AlterPartitionReassignmentsRequest(timeout_ms=10000, allow_replication_factor_change=False, topics=[
        _ATopic(name="grow", partitions=[_APartition(partition_index=0, replicas=[1, 2, 3])])])
    with WireClient("127.0.0.1", controller.port) as c:
        r = c.request(req, 1)  # KIP-860
    assert r.responses[0].partitions[0].error_code == errors.InvalidReplicationFactor.code
    assert _zk_json(cluster, "/brokers/topics/grow")["partitions"] == {"0": [1]}

    assert _alter(controller, "grow", 0, [3, 2, 1]).responses[0].partitions[0].error_code == errors.NONE
    wait_until("three in-sync replicas", lambda: sorted(_zk_json(
        cluster, "/brokers/topics/grow/partitions/0/state")["isr"]) == [1, 2, 3]
        and _zk_json(cluster, "/brokers/topics/grow")["adding_replicas"] == {}, 60)
    assert _zk_json(cluster, "/brokers/topics/grow")["partitions"] == {"0": [3, 2, 1]}

    assert _alter(controller, "grow", 0, [2]).responses[0].partitions[0].error_code == errors.NONE
    wait_until("one replica left", lambda: _zk_json(cluster, "/brokers/topics/grow")["partitions"] == {"0": [2]})
    state = _zk_json(cluster, "/brokers/topics/grow/partitions/0/state")
    assert (state["leader"], state["isr"]) == (2, [2])
    for b in (1, 3):
        wait_until(f"broker {b} to delete its replica",
                   lambda b=b: not (cluster.brokers[b].data_dir / "grow-0").exists())
    records = consume_all(cluster, "grow", 1, len(acked))
    assert {(p, o): v for p, o, v in records} == acked


def test_generate_proposes_a_layout_over_the_given_brokers_and_execute_applies_it(cluster, tmp_path):
    _create(cluster, "spread", [[1, 2], [2, 1]])
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "spread"}]}))
    args = ["partitions", "reassign", "-b", cluster.bootstrap_servers, "--generate",
            "--topics-to-move-json-file", str(topics)]
    r = CliRunner().invoke(cli, [*args, "--broker-list", "2,3"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[3] == "Proposed partition reassignment " \
                                                                               "configuration"
    assert json.loads(lines[1])["partitions"] == [
        {"topic": "spread", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "spread", "partition": 1, "replicas": [2, 1], "log_dirs": ["any", "any"]}]
    proposed = json.loads(lines[4])["partitions"]
    assert [(m["partition"], sorted(m["replicas"])) for m in proposed] == [(0, [2, 3]), (1, [2, 3])]

    r = CliRunner().invoke(cli, [*args, "--broker-list", "3"])
    assert r.exit_code == 1 and "cannot spread spread over brokers [3]" in r.output

    out = _reassign(cluster, tmp_path, "--execute", proposed)
    assert "Successfully started partition reassignments for spread-0,spread-1" in out
    wait_until("both partitions moved", lambda: _reassign(cluster, tmp_path, "--verify", proposed).count(
        "is completed.") == 2, 60)
    assert _zk_json(cluster, "/brokers/topics/spread")["partitions"] == {
        str(m["partition"]): m["replicas"] for m in proposed}
    wait_until("broker 1 to delete its replicas", lambda: not any(
        (cluster.brokers[1].data_dir / f"spread-{p}").exists() for p in (0, 1)))


def test_a_reassignment_written_to_zookeeper_is_carried_out_and_its_znode_removed(cluster):
    # what kafka-reassign-partitions --zookeeper (before KIP-455) wrote: the controller still acts on it
    _create(cluster, "legacy", [[1, 2], [1, 2]])
    acked = produce_n(cluster, "legacy", 300)
    client = KazooClient(hosts=cluster.zookeeper.connect_string, timeout=10)
    client.start(10)
    try:
        client.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": "legacy", "partition": 0, "replicas": [3, 2]},
            {"topic": "legacy", "partition": 1, "replicas": [2, 9]}]}).encode())  # broker 9 does not exist
        wait_until("the znode to be gone", lambda: client.exists("/admin/reassign_partitions") is None, 60)
    finally:
        client.stop()
        client.close()
    node = _zk_json(cluster, "/brokers/topics/legacy")
    assert node["partitions"] == {"0": [3, 2], "1": [1, 2]}
    assert node["adding_replicas"] == {} and node["removing_replicas"] == {}
    assert sorted(_zk_json(cluster, "/brokers/topics/legacy/partitions/0/state")["isr"]) == [2, 3]
    records = consume_all(cluster, "legacy", 2, len(acked))
    assert {(p, o): v for p, o, v in records} == acked


def test_elect_leaders_moves_leadership_to_the_preferred_replica(cluster, tmp_path):
    _create(cluster, "pref", [[1, 2], [2, 1]])
    controller = cluster.brokers[metadata(cluster.brokers[1]).controller_id]
    assert _alter(controller, "pref", 0, [2, 1]).responses[0].partitions[0].error_code == errors.NONE  # 1 still leads
    wait_until("the new order everywhere", lambda: all(
        list(_partition(cluster, b, "pref", 0).replica_nodes) == [2, 1] for b in cluster.brokers))
    assert _partition(cluster, 1, "pref", 0).leader_id == 1
    listed = tmp_path / "elect.json"
    listed.write_text(json.dumps({"partitions": [{"topic": "pref", "partition": 0},
                                                 {"topic": "pref", "partition": 1}]}))
    r = CliRunner().invoke(cli, ["partitions", "elect-leaders", "-b", cluster.bootstrap_servers, "--election-type",
                                 "preferred", "--path-to-json-file", str(listed)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == ["Successfully completed leader election (PREFERRED) for partitions pref-0",
                                     "Valid replica already elected for partitions pref-1"]
    wait_until("broker 2 to lead pref-0", lambda: _partition(cluster, 3, "pref", 0).leader_id == 2)
    r = CliRunner().invoke(cli, ["partitions", "elect-leaders", "-b", cluster.bootstrap_servers, "--election-type",
                                 "unclean", "--topic", "pref", "--partition", "0"])
    assert r.exit_code == 0 and r.output == "Valid replica already elected for partitions pref-0\n", r.output
    r = CliRunner().invoke(cli, ["partitions", "elect-leaders", "-b", cluster.bootstrap_servers, "--election-type",
                                 "preferred", "--topic", "absent", "--partition", "0"])
    assert r.exit_code == 1 and "1 replica(s) could not be elected (PREFERRED): absent-0: " in r.output


@pytest.mark.slow_faults
def test_a_new_controller_completes_a_reassignment_the_old_one_started(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3, **{"zookeeper.session.timeout.ms": "30000"})
    try:
        controller = metadata(cluster.brokers[1]).controller_id
        other, paused = [b for b in (1, 2, 3) if b != controller]
        _create(cluster, "handover", [[controller, other]])
        acked = produce_n(cluster, "handover", 300)
        os.kill(cluster.brokers[paused].pid, signal.SIGSTOP)  # the new replica cannot catch up yet
        try:
            r = _alter(cluster.brokers[controller], "handover", 0, [other, paused])
            assert r.responses[0].partitions[0].error_code == errors.NONE
            # the controller (also the partition's leader, and a replica being removed) stops: leadership moves
            # to `other`, which is elected controller and finds the reassignment half-way in ZooKeeper
            cluster.stop_broker(controller)
            wait_until("a new controller", lambda: metadata(cluster.brokers[other]).controller_id == other, 30)
            assert _zk_json(cluster, "/brokers/topics/handover")["adding_replicas"] == {"0": [paused]}
        finally:
            os.kill(cluster.brokers[paused].pid, signal.SIGCONT)
        wait_until("the new controller to complete the reassignment", lambda: _zk_json(
            cluster, "/brokers/topics/handover") == {**_zk_json(cluster, "/brokers/topics/handover"),
                                                     "partitions": {"0": [other, paused]}, "adding_replicas": {},
                                                     "removing_replicas": {}}, 60)
        state = _zk_json(cluster, "/brokers/topics/handover/partitions/0/state")
        assert state["leader"] == other and sorted(state["isr"]) == sorted([other, paused])
        records = consume_all(cluster, "handover", 1, len(acked))
        assert {(p, o): v for p, o, v in records} == acked
    finally:
        cluster.stop()


@pytest.mark.slow_faults
def test_a_new_replica_killed_mid_move_catches_up_after_its_restart_and_the_move_completes(tmp_path):
    cluster = start_cluster(tmp_path / "c", 3, **{"zookeeper.session.timeout.ms": "6000"})
    try:
        controller = metadata(cluster.brokers[1]).controller_id
        k = max(b for b in (1, 2, 3) if b != controller)  # the new replica, killed mid-move (not the controller)
        x, y = sorted({1, 2, 3} - {k})
        _create(cluster, "crash", [[x, y]], **{"min.insync.replicas": "2"})
        acked = produce_n(cluster, "crash", 2000)
        os.kill(cluster.brokers[k].pid, signal.SIGSTOP)  # paused: it stays registered until its session expires
        r = _alter(cluster.brokers[controller], "crash", 0, [k, y])
        assert r.responses[0].partitions[0].error_code == errors.NONE
        assert _zk_json(cluster, "/brokers/topics/crash")["adding_replicas"] == {"0": [k]}
        cluster.kill_broker(k)
        acked.update(produce_n(cluster, "crash", 1000, prefix=b"during"))  # x and y keep the ISR at two
        cluster.start_broker(k)
        wait_until("the move to complete after the restart", lambda: _zk_json(
            cluster, "/brokers/topics/crash")["partitions"] == {"0": [k, y]}, 60)
        state = _zk_json(cluster, "/brokers/topics/crash/partitions/0/state")
        assert state["leader"] == k and sorted(state["isr"]) == sorted([k, y])
        acked.update(produce_n(cluster, "crash", 500, prefix=b"after"))
        records = consume_all(cluster, "crash", 1, len(acked))
        assert {(p, o): v for p, o, v in records} == acked
    finally:
        cluster.stop()


# -- without processes ---------------------------------------------------------------------------------------

def test_replica_assignment_follows_kafkas_rs_adding_removing_arithmetic():
    from tidelake.cluster.reassignment import ReplicaAssignment
    start = ReplicaAssignment((1, 2, 3))
    moving = start.reassign_to([4, 2, 5])
    assert moving == ReplicaAssignment((4, 2, 5, 1, 3), adding=(4, 5), removing=(1, 3))
    assert (moving.original, moving.target, moving.is_being_reassigned) == ([2, 1, 3], [4, 2, 5], True)
    # a new target while moving is measured against the same original replicas
    again = moving.reassign_to([2, 6])
    assert again == ReplicaAssignment((2, 6, 1, 3), adding=(6,), removing=(1, 3))
    # cancelling: back to the original set (in RS order, as Kafka's znode keeps it)
    assert moving.reassign_to(moving.original) == ReplicaAssignment((2, 1, 3))
    assert not start.reassign_to([3, 2, 1]).is_being_reassigned


def test_invalid_targets_are_named_as_kafka_names_them():
    from tidelake.cluster.reassignment import ReplicaAssignment, invalid_target
    live, current = {1, 2, 3}, ReplicaAssignment((1, 4))  # broker 4 is down
    assert invalid_target([], current, live) == "Empty replica list specified in partition reassignment."
    assert "Duplicate replica ids" in invalid_target([1, 1], current, live)
    assert invalid_target([1, -2], current, live) == "Invalid broker id in replica list: [1, -2]"
    assert invalid_target([1, 7], current, live) == ("Replica assignment has brokers that are not alive. Replica "
                                                     "list: [7], live broker list: [1, 2, 3]")
    assert invalid_target([3, 1], current, live) is None
    assert invalid_target([4, 2], current, live) is None  # a replica it keeps may be down


def test_the_topic_znode_carries_adding_and_removing_replicas_in_kafkas_keys():
    import uuid

    from tidelake.cluster.znodes import TopicAssignment
    tid = uuid.UUID(int=7)
    a = TopicAssignment("t", tid, {0: [2, 3, 1], 1: [1, 2]}, adding={0: [3]}, removing={0: [1]})
    doc = json.loads(a.encode())
    assert doc["partitions"] == {"0": [2, 3, 1], "1": [1, 2]}
    assert doc["adding_replicas"] == {"0": [3]} and doc["removing_replicas"] == {"0": [1]}
    back = TopicAssignment.decode("t", a.encode())
    assert (back.partitions, back.adding, back.removing) == (a.partitions, a.adding, a.removing)
    assert back.reassigning(0) and not back.reassigning(1)
    plain = json.loads(TopicAssignment("t", tid, {0: [1]}).encode())
    assert plain["adding_replicas"] == {} and plain["removing_replicas"] == {}


def test_a_single_broker_has_nowhere_to_move_a_replica(tmp_path):
    from tidelake.broker import EmbeddedBroker
    with EmbeddedBroker(tmp_path) as b:
        b.run(b.broker.create_topic, "t", 1)
        codes = {}
        for name, target in (("same", [1]), ("elsewhere", [2]), ("cancel", None)):
            r = _alter(b, "t", 0, target)
            codes[name] = r.responses[0].partitions[0].error_code
        assert codes == {"same": errors.NONE, "elsewhere": errors.InvalidReplicaAssignment.code,
                         "cancel": errors.NoReassignmentInProgress.code}
        assert _alter(b, "absent", 0, [1]).responses[0].partitions[0].error_code == errors.UnknownTopicOrPartition.code
        assert _list(b).error_code == errors.NONE and _list(b).topics == []


def test_the_zookeeper_reassignment_znode_is_kafkas_json():
    from tidelake.cluster.znodes import decode_reassignment, encode_reassignment
    data = encode_reassignment({("b", 1): [3, 1], ("a", 0): [2]})
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [2]},
                                                             {"topic": "b", "partition": 1, "replicas": [3, 1]}]}
    kafka_written = (b'{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[1,2],'
                     b'"log_dirs":["any","any"]}]}')
    assert decode_reassignment(kafka_written) == {("t", 2): [1, 2]}
