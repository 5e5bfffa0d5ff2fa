"""``tidelake partitions reassign`` — Kafka's kafka-reassign-partitions.sh (``--generate``, ``--execute``,
``--verify``, ``--cancel`` with its ``--reassignment-json-file`` format) over AlterPartitionReassignments /
ListPartitionReassignments (KIP-455), which kafka-python's admin client sends to the controller.

The file is Kafka's: ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}``
(``log_dirs``, if present, must be ``any``: one log directory per broker here).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options


@click.group(cls=CommandGroup)
def partitions() -> None:
    """Move partition replicas between brokers of a cluster."""


@dataclass(frozen=True)
class Move:
    topic: str
    partition: int
    replicas: list[int]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def parse_reassignment_json(text: str, source: str) -> list[Move]:
    """Kafka's reassignment JSON; a malformed one is one error naming ``source`` and the bad entry."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(f"{source}: not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise CliError(f'{source}: expected {{"version":1,"partitions":[...]}}')
    if doc.get("version", 1) != 1:
        raise CliError(f"{source}: unsupported version {doc.get('version')!r} (Kafka's format is version 1)")
    moves, seen = [], set()
    for i, entry in enumerate(doc["partitions"]):
        where = f"{source}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise CliError(f"{where}: expected an object with topic, partition and replicas")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise CliError(f"{where}: topic must be a non-empty string")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise CliError(f"{where}: partition must be a non-negative integer")
        if (not isinstance(replicas, list) or not replicas
                or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas)):
            raise CliError(f"{where}: replicas must be a non-empty list of broker ids")
        if len(set(replicas)) != len(replicas):
            raise CliError(f"{where}: duplicate broker ids in replicas {replicas}")
        dirs = entry.get("log_dirs")
        if dirs is not None and (not isinstance(dirs, list) or len(dirs) != len(replicas)
                                 or any(d != "any" for d in dirs)):
            raise CliError(f"{where}: log_dirs must be \"any\" for each replica (a broker has one log directory)")
        if (topic, partition) in seen:
            raise CliError(f"{where}: {topic}-{partition} is listed twice")
        seen.add((topic, partition))
        moves.append(Move(topic, partition, list(replicas)))
    if not moves:
        raise CliError(f"{source}: no partitions to reassign")
    return moves


@dataclass(frozen=True)
class ClusterView:
    """What the cluster's metadata says of the moves: each partition's replicas now, and the live brokers."""
    current: dict[tuple[str, int], list[int]]
    brokers: list[int]

    def unknown_brokers(self, replicas: list[int]) -> list[int]:
        return [r for r in replicas if r not in self.brokers]


def _cluster_view(conn: BrokerConnection, moves: list[Move]) -> ClusterView:
    md = conn.reachable(conn.admin())
    out = {}
    for m in moves:
        t = md.topics.get(m.topic)
        if t is None or t.error is not None or m.partition not in t.partitions:
            raise CliError(f"{m.name} does not exist")
        out[(m.topic, m.partition)] = list(t.partitions[m.partition].replicas)
    return ClusterView(out, sorted(md.brokers))


def _not_in_cluster(brokers: list[int], live: list[int]) -> str:
    return (f"broker{'s' if len(brokers) > 1 else ''} {_ids(brokers)} {'are' if len(brokers) > 1 else 'is'} not in "
            f"the cluster (live brokers: {_ids(live)})")


def _admin_call(conn: BrokerConnection, what: str, fn, *args):
    from kafka.errors import KafkaError
    try:
        return fn(*args)
    except (KafkaError, RuntimeError) as e:  # RuntimeError: kafka-python found no controller
        raise CliError(f"{what}: {type(e).__name__}: {e}") from None


@partitions.command()
@broker_options
@click.option("--reassignment-json-file", "json_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Kafka's reassignment JSON: "
                   "{\"version\":1,\"partitions\":[{\"topic\",\"partition\",\"replicas\"}]}.")
@click.option("--execute", "action", flag_value="execute", help="Start the reassignment.")
@click.option("--verify", "action", flag_value="verify", help="Say whether each partition's reassignment is done.")
@click.option("--cancel", "action", flag_value="cancel", help="Cancel the reassignments in progress (back to the "
                                                              "original replicas).")
@click.option("--generate", "action", flag_value="generate",
              help="Propose a reassignment of the topics of --topics-to-move-json-file over --broker-list.")
@click.option("--topics-to-move-json-file", "topics_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="With --generate: {\"version\":1,\"topics\":[{\"topic\":\"t\"}]}.")
@click.option("--broker-list", default=None, metavar="ID,ID,...", help="With --generate: the brokers to spread over.")
def reassign(conn: BrokerConnection, json_file: str | None, action: str | None, topics_file: str | None,
             broker_list: str | None) -> None:
    """Reassign partitions as kafka-reassign-partitions.sh does: --generate, --execute, --verify or --cancel."""
    if action is None:
        raise click.UsageError("give one of --generate, --execute, --verify, --cancel")
    if action == "generate":
        if topics_file is None or broker_list is None:
            raise click.UsageError("--generate needs --topics-to-move-json-file and --broker-list")
        _generate(conn, topics_file, broker_list)
        return
    if json_file is None:
        raise click.UsageError(f"--{action} needs --reassignment-json-file")
    with open(json_file, encoding="utf-8") as f:
        moves = parse_reassignment_json(f.read(), json_file)
    from kafka import TopicPartition
    view = _cluster_view(conn, moves)
    current = view.current
    if action == "execute":
        # as Kafka's tool: a move onto a broker the cluster does not have is refused here, naming the broker
        unknown = [f"{m.name}: {_not_in_cluster(bad, view.brokers)}" for m in moves
                   if (bad := view.unknown_brokers(m.replicas))]
        if unknown:
            raise CliError("reassignment refused: " + "; ".join(unknown))
    admin = conn.kafka_python_admin()
    try:
        if action == "execute":
            rollback = {"version": 1, "partitions": [
                {"topic": m.topic, "partition": m.partition, "replicas": current[(m.topic, m.partition)],
                 "log_dirs": ["any"] * len(current[(m.topic, m.partition)])} for m in moves]}
            click.echo("Current partition replica assignment\n")
            click.echo(json.dumps(rollback, separators=(",", ":")))
            click.echo("\nSave this to use as the --reassignment-json-file option during rollback")
            wanted = {TopicPartition(m.topic, m.partition): m.replicas for m in moves}
            results = _alter(conn, admin, wanted, "cannot start the reassignment")
            failed = {tp: err for tp, err in results.items() if err is not None}
            if failed:
                raise CliError("reassignment refused: " + "; ".join(
                    f"{tp.topic}-{tp.partition} to replicas {_ids(wanted[tp])}: {err.__name__}"
                    for tp, err in sorted(failed.items())))
            click.echo("Successfully started partition reassignment" + ("s" if len(moves) > 1 else "") + " for "
                       + ",".join(m.name for m in moves))
        elif action == "cancel":
            from kafka.errors import NoReassignmentInProgressError
            results = _alter(conn, admin, {TopicPartition(m.topic, m.partition): None for m in moves},
                             "cannot cancel the reassignment")
            cancelled = [f"{tp.topic}-{tp.partition}" for tp, err in sorted(results.items()) if err is None]
            failed = {tp: err for tp, err in results.items() if err not in (None, NoReassignmentInProgressError)}
            if failed:
                raise CliError("cancellation refused: " + "; ".join(
                    f"{tp.topic}-{tp.partition}: {err.__name__}" for tp, err in sorted(failed.items())))
            click.echo(f"Successfully cancelled partition reassignments for: {','.join(cancelled)}" if cancelled
                       else "None of the specified partition reassignments are active.")
        else:
            ongoing = _admin_call(conn, "cannot list the reassignments", admin.list_partition_reassignments,
                                  [TopicPartition(m.topic, m.partition) for m in moves])
            click.echo("Status of partition reassignment:")
            for m in moves:
                cur = current[(m.topic, m.partition)]
                if TopicPartition(m.topic, m.partition) in ongoing:
                    click.echo(f"Reassignment of partition {m.name} is still in progress.")
                elif cur == m.replicas:
                    click.echo(f"Reassignment of partition {m.name} is completed.")
                else:
                    click.echo(f"There is no active reassignment of partition {m.name}, but replica set is "
                               f"{_ids(cur)} rather than {_ids(m.replicas)}.")
    finally:
        admin.close()


def _generate(conn: BrokerConnection, topics_file: str, broker_list: str) -> None:
    """Kafka's --generate: each topic's partitions spread over the brokers with its replication factor, by
    Kafka's rack-unaware round robin from a random start (so two runs may propose different layouts)."""
    from tidelake.cluster.assignment import assign_replicas
    from tidelake.errors import KafkaApiError
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        raise CliError(f"--broker-list {broker_list!r}: expected broker ids like 1,2,3") from None
    if not brokers or len(set(brokers)) != len(brokers):
        raise CliError(f"--broker-list {broker_list!r}: expected distinct broker ids like 1,2,3")
    with open(topics_file, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = json.loads(text)
        names = [t["topic"] for t in doc["topics"]]
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise CliError(f'{topics_file}: expected {{"version":1,"topics":[{{"topic":"name"}}, ...]}}') from None
    md = conn.reachable(conn.admin())
    absent = [b for b in brokers if b not in md.brokers]
    if absent:  # proposed all the same (a broker may be about to join), but --execute would refuse it
        click.echo(f"warning: --broker-list: {_not_in_cluster(absent, sorted(md.brokers))}; --execute refuses a "
                   "move onto it", err=True)
    current, proposed = [], []
    for name in dict.fromkeys(names):
        t = md.topics.get(name)
        if t is None or t.error is not None:
            raise CliError(f"{topics_file}: topic {name} does not exist")
        parts = sorted(t.partitions)
        for p in parts:
            replicas = list(t.partitions[p].replicas)
            current.append({"topic": name, "partition": p, "replicas": replicas, "log_dirs": ["any"] * len(replicas)})
        rf = len(t.partitions[parts[0]].replicas)
        try:
            layout = assign_replicas(len(parts), rf, brokers)
        except KafkaApiError as e:
            raise CliError(f"cannot spread {name} over brokers {brokers}: {e}") from None
        for p, replicas in sorted(layout.items()):
            proposed.append({"topic": name, "partition": p, "replicas": replicas, "log_dirs": ["any"] * len(replicas)})
    click.echo("Current partition replica assignment")
    click.echo(json.dumps({"version": 1, "partitions": current}, separators=(",", ":")))
    click.echo("\nProposed partition reassignment configuration")
    click.echo(json.dumps({"version": 1, "partitions": proposed}, separators=(",", ":")))


def _ids(replicas: list[int]) -> str:
    return ",".join(map(str, replicas))


def _alter(conn: BrokerConnection, admin, wanted: dict, what: str) -> dict:
    """{TopicPartition: None or the kafka-python error class} from the controller."""
    return _admin_call(conn, what, admin.alter_partition_reassignments, wanted, int(conn.timeout * 1000))


@partitions.command("elect-leaders")
@broker_options
@click.option("--election-type", type=click.Choice(["PREFERRED", "UNCLEAN"], case_sensitive=False), required=True,
              help="PREFERRED: the first replica leads again; UNCLEAN: a live replica out of the ISR may lead a "
                   "partition that has no leader (data may be lost).")
@click.option("--topic", default=None, help="The topic of --partition.")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="One partition of --topic.")
@click.option("--all-topic-partitions", is_flag=True, help="Every partition of every topic.")
@click.option("--path-to-json-file", "json_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help='The partitions: {"partitions":[{"topic":"t","partition":0}]}.')
def elect_leaders(conn: BrokerConnection, election_type: str, topic: str | None, partition: int | None,
                  all_topic_partitions: bool, json_file: str | None) -> None:
    """Elect partition leaders, as kafka-leader-election.sh does (ElectLeaders, answered by the controller)."""
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    chosen = sum((topic is not None, all_topic_partitions, json_file is not None))
    if chosen != 1:
        raise click.UsageError("give exactly one of --topic with --partition, --all-topic-partitions, "
                               "--path-to-json-file")
    if (topic is None) != (partition is None):
        raise click.UsageError("--topic and --partition go together")
    wanted = None
    if topic is not None:
        wanted = [TopicPartition(topic, partition)]
    elif json_file is not None:
        with open(json_file, encoding="utf-8") as f:
            text = f.read()
        try:
            entries = json.loads(text)["partitions"]
            wanted = [TopicPartition(e["topic"], int(e["partition"])) for e in entries]
            if not wanted or not all(isinstance(e["topic"], str) and e["topic"] for e in entries):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            raise CliError(f'{json_file}: expected {{"partitions":[{{"topic":"t","partition":0}}, ...]}}') from None
    kind = election_type.upper()
    admin = conn.admin()
    # (no request_timeout: confluent-kafka 2.16's elect_leaders fails on its keyword arguments; the client's
    # socket.timeout.ms and the future's wait bound it)
    results = conn.wait(admin.elect_leaders(ElectionType[kind], wanted), f"cannot elect leaders ({kind})")
    done, noop, failed = [], [], []
    for tp, err in sorted(results.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        name = f"{tp.topic}-{tp.partition}"
        if err is not None and not isinstance(err, KafkaError):  # a KafkaException wrapping it
            err = err.args[0] if err.args and isinstance(err.args[0], KafkaError) else err
        if err is None:
            done.append(name)
        elif isinstance(err, KafkaError) and err.code() == KafkaError.ELECTION_NOT_NEEDED:
            noop.append(name)
        else:
            failed.append(f"{name}: {err.name() if isinstance(err, KafkaError) else err}")
    if done:
        click.echo(f"Successfully completed leader election ({kind}) for partitions {', '.join(done)}")
    if noop:
        click.echo(f"Valid replica already elected for partitions {', '.join(noop)}")
    if failed:
        raise CliError(f"{len(failed)} replica(s) could not be elected ({kind}): " + "; ".join(failed))
