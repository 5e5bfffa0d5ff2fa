"""`tidelake topics create|list|describe|alter|delete` — Kafka's kafka-topics.sh, over any
Kafka-compatible broker (confluent-kafka's AdminClient)."""
from __future__ import annotations

import click
from rich.table import Table

from tidelake.cli._kafka import admin_client, bootstrap_option, console, parse_pairs, wait

# confluent-kafka reports a config's source as an int; these are Kafka's names for them.
_SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                 3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


@click.group()
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


@topics.command()
@bootstrap_option
@click.argument("topic")
@click.option("--partitions", type=click.IntRange(min=1), default=None,
              help="Number of partitions (default: the broker's num.partitions).")
@click.option("--replication-factor", type=click.IntRange(min=1), default=None,
              help="Replication factor (default: the broker's).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config; repeatable.")
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic already exists.")
def create(bootstrap: str, topic: str, partitions: int | None, replication_factor: int | None,
           configs: tuple[str, ...], if_not_exists: bool) -> None:
    """Create TOPIC."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic
    admin = admin_client(bootstrap)
    new = NewTopic(topic, num_partitions=partitions or -1, replication_factor=replication_factor or -1,
                   config=parse_pairs(configs, "--config"))
    future = admin.create_topics([new], operation_timeout=30, request_timeout=30)[topic]
    try:
        future.result(30)
    except KafkaException as e:
        if if_not_exists and e.args and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            click.echo(f"Topic {topic} already exists.")
            return
        wait(future, f"cannot create topic {topic}")
    click.echo(f"Created topic {topic}.")


@topics.command(name="list")
@bootstrap_option
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (names starting with __).")
def list_topics(bootstrap: str, exclude_internal: bool) -> None:
    """List topic names, one per line."""
    try:
        md = admin_client(bootstrap).list_topics(timeout=30)
    except Exception as e:
        raise click.ClickException(f"cannot list topics: {e}") from e
    for name in sorted(md.topics):
        if not (exclude_internal and name.startswith("__")):
            click.echo(name)


@topics.command()
@bootstrap_option
@click.argument("topic_names", metavar="[TOPIC]...", nargs=-1)
@click.option("--all-configs", is_flag=True, help="Show every config, not only those set on the topic.")
def describe(bootstrap: str, topic_names: tuple[str, ...], all_configs: bool) -> None:
    """Partitions (leader, replicas, ISR, log start, high watermark) and configs of each TOPIC
    (default: every topic)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import ConfigResource, OffsetSpec
    admin = admin_client(bootstrap)
    try:
        md = admin.list_topics(timeout=30)
    except Exception as e:
        raise click.ClickException(f"cannot read metadata: {e}") from e
    names = list(topic_names) or sorted(md.topics)
    missing = [n for n in names if n not in md.topics or md.topics[n].error is not None]
    if missing:
        raise click.ClickException(f"unknown topic(s): {', '.join(missing)}")
    out = console()
    for name in names:
        partitions = sorted(md.topics[name].partitions.values(), key=lambda p: p.id)
        tps = [TopicPartition(name, p.id) for p in partitions]
        starts = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps}, request_timeout=30) if tps else {}
        ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=30) if tps else {}
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        configs = wait(admin.describe_configs([resource], request_timeout=30)[resource],
                       f"cannot describe configs of {name}")

        table = Table(title=f"Topic: {name}   partitions: {len(partitions)}", title_justify="left")
        for col in ("Partition", "Leader", "Replicas", "ISR", "Log start", "High watermark"):
            table.add_column(col, justify="right")
        for p, tp in zip(partitions, tps):
            start = wait(_future_for(starts, tp), f"cannot list offsets of {name}-{p.id}").offset
            end = wait(_future_for(ends, tp), f"cannot list offsets of {name}-{p.id}").offset
            table.add_row(str(p.id), str(p.leader), ",".join(map(str, p.replicas)), ",".join(map(str, p.isrs)),
                          str(start), str(end))
        out.print(table)

        shown = sorted((c for c in configs.values() if all_configs or not c.is_default), key=lambda c: c.name)
        ctable = Table(title=f"Configs of {name}" + ("" if all_configs else " (set on the topic; --all-configs "
                                                                          "for all)"), title_justify="left")
        for col in ("Name", "Value", "Source", "Read-only"):
            ctable.add_column(col)
        for c in shown:
            ctable.add_row(c.name, "" if c.value is None else str(c.value), _SOURCE_NAMES.get(c.source, str(c.source)),
                           "yes" if c.is_read_only else "")
        out.print(ctable)


def _future_for(futures: dict, tp):
    # list_offsets keys its result by new TopicPartition objects: match on (topic, partition).
    for key, fut in futures.items():
        if (key.topic, key.partition) == (tp.topic, tp.partition):
            return fut
    raise click.ClickException(f"no offset answer for {tp.topic}-{tp.partition}")


@topics.command()
@bootstrap_option
@click.argument("topic")
@click.option("--partitions", type=click.IntRange(min=1), default=None, help="New (larger) number of partitions.")
@click.option("--set", "set_configs", multiple=True, metavar="KEY=VALUE", help="Set a topic config; repeatable.")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="KEY",
              help="Remove a topic config (back to its default); repeatable.")
def alter(bootstrap: str, topic: str, partitions: int | None, set_configs: tuple[str, ...],
          delete_configs: tuple[str, ...]) -> None:
    """Add partitions to TOPIC and/or change its configs (incrementally)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions
    if partitions is None and not set_configs and not delete_configs:
        raise click.UsageError("nothing to alter: give --partitions, --set or --delete-config")
    admin = admin_client(bootstrap)
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
           for k, v in parse_pairs(set_configs, "--set").items()]
    ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete_configs]
    if ops:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=ops)
        wait(admin.incremental_alter_configs([resource], request_timeout=30)[resource],
             f"cannot alter configs of {topic}")
        click.echo(f"Altered configs of {topic}.")
    if partitions is not None:
        wait(admin.create_partitions([NewPartitions(topic, partitions)], operation_timeout=30,
                                     request_timeout=30)[topic], f"cannot set partitions of {topic} to {partitions}")
        click.echo(f"Topic {topic} now has {partitions} partitions.")


@topics.command()
@bootstrap_option
@click.argument("topic_names", metavar="TOPIC...", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="Succeed if a topic does not exist.")
def delete(bootstrap: str, topic_names: tuple[str, ...], if_exists: bool) -> None:
    """Delete each TOPIC."""
    from confluent_kafka import KafkaError, KafkaException
    admin = admin_client(bootstrap)  # keep a reference: the futures fail if the client is destroyed
    futures = admin.delete_topics(list(topic_names), operation_timeout=30, request_timeout=30)
    for name, future in futures.items():
        try:
            future.result(30)
            click.echo(f"Deleted topic {name}.")
        except KafkaException as e:
            if if_exists and e.args and e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                click.echo(f"Topic {name} does not exist.")
                continue
            wait(future, f"cannot delete topic {name}")
