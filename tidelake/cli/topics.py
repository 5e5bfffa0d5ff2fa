"""`tidelake topics create|list|describe|alter|delete` — Kafka's kafka-topics.sh, over any
Kafka-compatible broker (confluent-kafka's AdminClient)."""
from __future__ import annotations

import socket

import click

from tidelake.cli.configs import SOURCE_NAMES, alter_configs
from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows
from tidelake.cli.values import parse_pairs

# how long describe waits for a partition leader to take a connection before it marks the leader's offsets unknown
LEADER_PROBE_S = 2.0


@click.group(cls=CommandGroup)
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


@topics.command()
@broker_options
@click.argument("topic")
@click.option("--partitions", type=click.IntRange(min=1), default=None,
              help="Number of partitions (default: the broker's num.partitions).")
@click.option("--replication-factor", type=click.IntRange(min=1), default=None,
              help="Replication factor (default: the broker's).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config; repeatable.")
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic already exists.")
def create(conn: BrokerConnection, topic: str, partitions: int | None, replication_factor: int | None,
           configs: tuple[str, ...], if_not_exists: bool) -> None:
    """Create TOPIC."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic
    new = NewTopic(topic, num_partitions=partitions or -1, replication_factor=replication_factor or -1,
                   config=parse_pairs(configs, "--config"))
    admin = conn.admin()
    future = admin.create_topics([new], operation_timeout=conn.timeout, request_timeout=conn.timeout)[topic]
    exists = conn.wait(future, f"cannot create topic {topic}",
                       tolerate=(KafkaError.TOPIC_ALREADY_EXISTS,) if if_not_exists else ())
    click.echo(f"Topic {topic} already exists." if exists is not None else f"Created topic {topic}.")


@topics.command(name="list")
@broker_options
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (names starting with __).")
@json_option
def list_topics(conn: BrokerConnection, exclude_internal: bool, as_json: bool) -> None:
    """List topic names, one per line."""
    md = conn.reachable(conn.admin())
    names = [n for n in sorted(md.topics) if not (exclude_internal and n.startswith("__"))]
    if as_json:
        print_json(names)
        return
    for name in names:
        click.echo(name)


@topics.command()
@broker_options
@click.argument("topic_names", metavar="[TOPIC]...", nargs=-1)
@click.option("--all-configs", is_flag=True, help="Show every config, not only those set on the topic.")
@json_option
def describe(conn: BrokerConnection, topic_names: tuple[str, ...], all_configs: bool, as_json: bool) -> None:
    """Partitions (leader, replicas, ISR, log start, high watermark) and configs of each TOPIC
    (default: every topic)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import ConfigResource, OffsetSpec
    admin = conn.admin()
    md = conn.reachable(admin)
    names = list(topic_names) or sorted(md.topics)
    missing = [n for n in names if n not in md.topics or md.topics[n].error is not None]
    if missing:
        raise CliError(f"unknown topic(s): {', '.join(missing)}")
    # librdkafka asks the controller for a topic's configs: a controller just killed (until ZooKeeper expires its
    # session and another is elected) would hold the command until --timeout, so it is probed with the leaders
    silent = _silent_leaders(md, {p.leader for n in names for p in md.topics[n].partitions.values()}
                             | {md.controller_id}, conn.timeout)
    configs_unknown = (f"controller {md.controller_id} does not answer" if md.controller_id < 0 or
                       md.controller_id in silent else None)
    docs = []
    for name in names:
        partitions = sorted(md.topics[name].partitions.values(), key=lambda p: p.id)
        # offsets are asked of the partitions' leaders: only of leaders that answer (a broker that just died
        # would hold the whole command until --timeout and answer nothing)
        unknown = {p.id: ("no leader" if p.leader < 0 else f"leader {p.leader} does not answer")
                   for p in partitions if p.leader < 0 or p.leader in silent}
        tps = [TopicPartition(name, p.id) for p in partitions if p.id not in unknown]
        timeouts = {"request_timeout": conn.timeout}
        starts = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps}, **timeouts) if tps else {}
        ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, **timeouts) if tps else {}
        configs = None
        if configs_unknown is None:
            resource = ConfigResource(ConfigResource.Type.TOPIC, name)
            configs = conn.wait(admin.describe_configs([resource], **timeouts)[resource],
                                f"cannot describe configs of {name}")
        rows = []
        for p in partitions:
            start = end = None
            if p.id not in unknown:
                tp = TopicPartition(name, p.id)
                try:
                    start = conn.wait(_future_for(starts, tp), f"offsets of {name}-{p.id}").offset
                    end = conn.wait(_future_for(ends, tp), f"offsets of {name}-{p.id}").offset
                except CliError as e:  # this partition's answer only: the others still show
                    unknown[p.id] = str(e.format_message())
                if start is not None and (start < 0 or end < 0):  # librdkafka's "no offset" (-1001)
                    unknown[p.id], start, end = "no offsets from its leader", None, None
            rows.append({"partition": p.id, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs),
                         "log_start_offset": start, "high_watermark": end, "unknown": unknown.get(p.id)})
        shown = sorted((c for c in (configs or {}).values() if all_configs or not c.is_default),
                       key=lambda c: c.name)
        docs.append({"topic": name, "partitions": rows,
                     "configs": None if configs is None else
                     [{"name": c.name, "value": c.value, "source": SOURCE_NAMES.get(c.source, str(c.source)),
                       "read_only": c.is_read_only} for c in shown],
                     "configs_unknown": configs_unknown})
    if as_json:
        print_json(docs)
        return
    for doc in docs:
        print_rows(("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK"),
                   [(r["partition"], r["leader"], ",".join(map(str, r["replicas"])), ",".join(map(str, r["isr"])),
                     _known(r["log_start_offset"]), _known(r["high_watermark"])) for r in doc["partitions"]],
                   title=f"Topic: {doc['topic']}   partitions: {len(doc['partitions'])}",
                   right=("PARTITION", "LOG-START-OFFSET", "HIGH-WATERMARK"))
        unknown = [f"{doc['topic']}-{r['partition']} ({r['unknown']})" for r in doc["partitions"] if r["unknown"]]
        if unknown:
            click.echo(f"offsets unknown (?): {', '.join(unknown)}", err=True)
        if doc["configs"] is None:
            click.echo(f"configs unknown: {doc['configs_unknown']}", err=True)
            continue
        print_rows(("CONFIG", "VALUE", "SOURCE", "READ-ONLY"),
                   [(c["name"], c["value"], c["source"], "yes" if c["read_only"] else "no") for c in doc["configs"]],
                   title=f"Configs of {doc['topic']}" + ("" if all_configs else " (set on the topic; --all-configs "
                                                                                 "for all)"))


def _known(offset: int | None) -> int | str:
    return "?" if offset is None else offset


def _silent_leaders(md, leaders: set[int], timeout: float) -> set[int]:
    """The ``leaders`` that take no TCP connection at their advertised address within ``timeout`` (at most
    LEADER_PROBE_S): a refused connection is known at once."""
    silent = set()
    for broker_id in sorted(b for b in leaders if b >= 0):
        broker = md.brokers.get(broker_id)
        if broker is None:  # not among the brokers the cluster lists as alive
            silent.add(broker_id)
            continue
        try:
            socket.create_connection((broker.host, broker.port), timeout=min(timeout, LEADER_PROBE_S)).close()
        except OSError:
            silent.add(broker_id)
    return silent


def _future_for(futures: dict, tp):
    # list_offsets keys its result by new TopicPartition objects: match on (topic, partition).
    for key, fut in futures.items():
        if (key.topic, key.partition) == (tp.topic, tp.partition):
            return fut
    raise CliError(f"no offset answer for {tp.topic}-{tp.partition}")


@topics.command()
@broker_options
@click.argument("topic")
@click.option("--partitions", type=click.IntRange(min=1), default=None, help="New (larger) number of partitions.")
@click.option("--set", "set_configs", multiple=True, metavar="KEY=VALUE", help="Set a topic config; repeatable.")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="KEY",
              help="Remove a topic config (back to its default); repeatable.")
def alter(conn: BrokerConnection, topic: str, partitions: int | None, set_configs: tuple[str, ...],
          delete_configs: tuple[str, ...]) -> None:
    """Add partitions to TOPIC and/or change its configs (incrementally)."""
    from confluent_kafka.admin import NewPartitions
    if partitions is None and not set_configs and not delete_configs:
        raise click.UsageError("nothing to alter: give --partitions, --set or --delete-config")
    sets = parse_pairs(set_configs, "--set")
    admin = conn.admin()
    if sets or delete_configs:
        alter_configs(conn, admin, "topic", topic, sets, delete_configs)
        click.echo(f"Altered configs of {topic}.")
    if partitions is not None:
        conn.wait(admin.create_partitions([NewPartitions(topic, partitions)], operation_timeout=conn.timeout,
                                          request_timeout=conn.timeout)[topic],
                  f"cannot set partitions of {topic} to {partitions}")
        click.echo(f"Topic {topic} now has {partitions} partitions.")


@topics.command()
@broker_options
@click.argument("topic_names", metavar="TOPIC...", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed if a topic does not exist.")
def delete(conn: BrokerConnection, topic_names: tuple[str, ...], if_exists: bool) -> None:
    """Delete each TOPIC."""
    from confluent_kafka import KafkaError
    admin = conn.admin()  # keep a reference: the futures fail if the client is destroyed
    futures = admin.delete_topics(list(topic_names), operation_timeout=conn.timeout, request_timeout=conn.timeout)
    for name, future in futures.items():
        missing = conn.wait(future, f"cannot delete topic {name}",
                            tolerate=(KafkaError.UNKNOWN_TOPIC_OR_PART,) if if_exists else ())
        click.echo(f"Topic {name} does not exist." if missing is not None else f"Deleted topic {name}.")
