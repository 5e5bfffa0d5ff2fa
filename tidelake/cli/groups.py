"""``tidelake groups``: list, describe (with CURRENT-OFFSET / LOG-END-OFFSET / LAG), reset-offsets,
delete — in the spirit of kafka-consumer-groups. Works against any Kafka broker (librdkafka admin)."""
from __future__ import annotations

from datetime import datetime, timezone

import click

TIMEOUT_S = 15


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def _console():
    from rich.console import Console
    return Console(width=200)


def _table(*columns: str):
    from rich.table import Table
    t = Table(box=None, pad_edge=False, header_style="bold")
    for c in columns:
        t.add_column(c)
    return t


def _name(enum_value) -> str:
    return getattr(enum_value, "name", str(enum_value))


bootstrap_option = click.option("--bootstrap-server", "bootstrap", default="127.0.0.1:9092", show_default=True,
                                help="HOST:PORT of a broker.")


@click.group()
def groups() -> None:
    """Consumer groups: list, describe, reset offsets, delete."""


@groups.command("list")
@bootstrap_option
def list_groups(bootstrap: str) -> None:
    """Every group with its state and type."""
    # kafka-python's admin asks every broker in the metadata; librdkafka's skips brokers it has
    # not connected to yet and can answer "no groups" from a fresh client.
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        listed = admin.list_groups()
    finally:
        admin.close()
    table = _table("GROUP", "STATE", "TYPE", "PROTOCOL-TYPE")
    for g in sorted(listed, key=lambda g: g["group_id"]):
        table.add_row(g["group_id"], g.get("group_state") or "-", g.get("group_type") or "classic",
                      g.get("protocol_type") or "")
    _console().print(table)


def _end_offsets(admin, partitions) -> dict:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    if not partitions:
        return {}
    futs = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions},
                              request_timeout=TIMEOUT_S)
    return {(tp.topic, tp.partition): f.result(TIMEOUT_S).offset for tp, f in futs.items()}


def _committed(admin, group: str) -> dict:
    from confluent_kafka import ConsumerGroupTopicPartitions
    futs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S)
    res = futs[group].result(TIMEOUT_S)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions}


@groups.command("describe")
@bootstrap_option
@click.argument("group")
def describe(bootstrap: str, group: str) -> None:
    """State, protocol, members, assignment, and per partition CURRENT-OFFSET, LOG-END-OFFSET, LAG."""
    admin = _admin(bootstrap)
    desc = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    console = _console()
    console.print(f"GROUP {desc.group_id}  STATE {_name(desc.state)}  TYPE {_name(getattr(desc, 'type', '')).lower()}"
                  f"  ASSIGNOR {desc.partition_assignor or '-'}  MEMBERS {len(desc.members)}")
    owner = {}
    for m in desc.members:
        for tp in (m.assignment.topic_partitions if m.assignment else []):
            owner[(tp.topic, tp.partition)] = m
    committed = _committed(admin, group)
    partitions = sorted(set(committed) | set(owner))
    ends = _end_offsets(admin, partitions)
    table = _table("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                   "CLIENT-ID")
    for key in partitions:
        current = committed.get(key, -1)
        end = ends.get(key, -1)
        m = owner.get(key)
        table.add_row(group, key[0], str(key[1]), str(current) if current >= 0 else "-", str(end),
                      str(end - current) if current >= 0 and end >= 0 else "-",
                      m.member_id if m else "-", m.host if m else "-", m.client_id if m else "-")
    console.print(table)
    idle = [m for m in desc.members if not (m.assignment and m.assignment.topic_partitions)]
    for m in idle:
        console.print(f"member {m.member_id} ({m.client_id}, {m.host}) has no partitions")


@groups.command("reset-offsets")
@bootstrap_option
@click.argument("group")
@click.option("--topic", required=True, help="Topic whose committed offsets to reset (all its partitions).")
@click.option("--to-earliest", "mode", flag_value="earliest")
@click.option("--to-latest", "mode", flag_value="latest")
@click.option("--to-offset", "to_offset", type=int, default=None)
@click.option("--to-datetime", "to_datetime", default=None, help="ISO 8601, e.g. 2026-01-31T12:00:00Z")
@click.option("--dry-run", is_flag=True, help="Print the new offsets without committing them.")
def reset_offsets(bootstrap: str, group: str, topic: str, mode: str | None, to_offset: int | None,
                  to_datetime: str | None, dry_run: bool) -> None:
    """Set the group's committed offsets of TOPIC (the group must have no active members)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec
    chosen = [x for x in (mode, to_offset, to_datetime) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    admin = _admin(bootstrap)
    meta = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise click.ClickException(f"unknown topic {topic}")
    parts = sorted(meta.partitions)

    def lookup(spec) -> dict[int, int]:
        futs = admin.list_offsets({TopicPartition(topic, p): spec for p in parts}, request_timeout=TIMEOUT_S)
        return {tp.partition: f.result(TIMEOUT_S).offset for tp, f in futs.items()}
    earliest, latest = lookup(OffsetSpec.earliest()), lookup(OffsetSpec.latest())
    if mode == "earliest":
        target = earliest
    elif mode == "latest":
        target = latest
    elif to_offset is not None:  # clamped into [earliest, latest] like Kafka's tool
        target = {p: min(max(to_offset, earliest[p]), latest[p]) for p in parts}
    else:
        ts = datetime.fromisoformat(to_datetime.replace("Z", "+00:00"))
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=timezone.utc)
        by_time = lookup(OffsetSpec.for_timestamp(int(ts.timestamp() * 1000)))
        target = {p: (o if o >= 0 else latest[p]) for p, o in by_time.items()}  # none that late: the end
    table = _table("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for p in parts:
        table.add_row(group, topic, str(p), str(target[p]))
    _console().print(table)
    if dry_run:
        return
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, target[p]) for p in parts])
    res = admin.alter_consumer_group_offsets([req], request_timeout=TIMEOUT_S)[group]
    try:
        done = res.result(TIMEOUT_S)
        errors = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in done.topic_partitions if tp.error]
    except Exception as e:
        errors = [str(e)]
    if errors:
        raise click.ClickException(f"cannot reset offsets of {group} (is it still active?): {'; '.join(errors)}")


@groups.command("delete")
@bootstrap_option
@click.argument("group", nargs=-1, required=True)
def delete(bootstrap: str, group: tuple[str, ...]) -> None:
    """Delete groups (and their committed offsets); a group with members cannot be deleted."""
    admin = _admin(bootstrap)  # keep a reference: the futures die with the client
    futs = admin.delete_consumer_groups(list(group), request_timeout=TIMEOUT_S)
    failed = False
    for g, f in futs.items():
        try:
            f.result(TIMEOUT_S)
            click.echo(f"deleted group {g}")
        except Exception as e:
            failed = True
            click.echo(f"cannot delete group {g}: {e!r}", err=True)
    if failed:
        raise SystemExit(1)
