"""``tidelake groups``: list, describe (CURRENT-OFFSET / LOG-END-OFFSET / LAG), reset-offsets,
delete-offsets, delete — kafka-consumer-groups' commands and option names, against any Kafka broker.

``reset-offsets`` only prints the plan unless ``--execute`` is given (``--dry-run`` is the default), and
refuses to change the offsets of a group that has active members, as Kafka's tool does.
"""
from __future__ import annotations

import time

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows
from tidelake.cli.topic_offsets import log_offsets, resolve_topic_partitions
from tidelake.cli.values import IsoDuration, TimestampMs

INACTIVE_STATES = ("EMPTY", "DEAD")


def _name(enum_value) -> str:
    return enum_value.name if enum_value is not None else "-"


@click.group(cls=CommandGroup)
def groups() -> None:
    """Consumer groups: list, describe, reset offsets, delete offsets, delete."""


@groups.command("list")
@broker_options
@json_option
def list_groups(conn: BrokerConnection, as_json: bool) -> None:
    """Every group with its state and type."""
    # kafka-python's admin asks every broker in the metadata; librdkafka's skips brokers it has
    # not connected to yet and can answer "no groups" from a fresh client.
    admin = conn.kafka_python_admin()
    try:
        listed = admin.list_groups()
    finally:
        admin.close()
    rows = [{"group": g["group_id"], "state": g.get("group_state"), "type": g.get("group_type") or "classic",
             "protocol_type": g.get("protocol_type") or None} for g in sorted(listed, key=lambda g: g["group_id"])]
    if as_json:
        print_json(rows)
        return
    print_rows(("GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"),
               [(r["group"], r["state"], r["type"], r["protocol_type"]) for r in rows])


def _committed(conn: BrokerConnection, admin, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    futs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=conn.timeout)
    res = conn.wait(futs[group], f"cannot fetch the committed offsets of group {group}")
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def _describe_group(conn: BrokerConnection, admin, group: str):
    return conn.wait(admin.describe_consumer_groups([group], request_timeout=conn.timeout)[group],
                     f"cannot describe group {group}")


@groups.command("describe")
@broker_options
@click.argument("group")
@json_option
def describe(conn: BrokerConnection, group: str, as_json: bool) -> None:
    """State, protocol, members, assignment, and per partition CURRENT-OFFSET, LOG-END-OFFSET, LAG."""
    from confluent_kafka.admin import OffsetSpec
    admin = conn.admin()
    desc = _describe_group(conn, admin, group)
    committed = _committed(conn, admin, group)
    if _name(desc.state) == "DEAD" and not committed:
        raise CliError(f"consumer group {group} does not exist")
    owner = {}
    for m in desc.members:
        for tp in (m.assignment.topic_partitions if m.assignment else []):
            owner[(tp.topic, tp.partition)] = m
    partitions = sorted(set(committed) | set(owner))
    ends = log_offsets(conn, admin, partitions, OffsetSpec.latest())
    rows = []
    for key in partitions:
        current, end, m = committed.get(key), ends.get(key), owner.get(key)
        rows.append({"group": group, "topic": key[0], "partition": key[1], "current_offset": current,
                     "log_end_offset": end, "lag": end - current if current is not None and end is not None else None,
                     "consumer_id": m.member_id if m else None, "host": m.host if m else None,
                     "client_id": m.client_id if m else None})
    info = {"group": desc.group_id, "state": _name(desc.state), "type": _name(desc.type).lower(),
            "assignor": desc.partition_assignor or None, "members": len(desc.members),
            "coordinator": desc.coordinator.id if desc.coordinator else None}
    idle = [{"consumer_id": m.member_id, "client_id": m.client_id, "host": m.host} for m in desc.members
            if not (m.assignment and m.assignment.topic_partitions)]
    if as_json:
        print_json({**info, "partitions": rows, "members_without_partitions": idle})
        return
    click.echo(f"GROUP {info['group']}  STATE {info['state']}  TYPE {info['type']}  ASSIGNOR {info['assignor'] or '-'}"
               f"  MEMBERS {info['members']}")
    print_rows(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                "CLIENT-ID"),
               [[r[k] for k in ("group", "topic", "partition", "current_offset", "log_end_offset", "lag",
                                "consumer_id", "host", "client_id")] for r in rows],
               right=("PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"))
    for m in idle:
        click.echo(f"member {m['consumer_id']} ({m['client_id']}, {m['host']}) has no partitions")


def _require_inactive(conn: BrokerConnection, admin, group: str, action: str) -> None:
    state = _name(_describe_group(conn, admin, group).state)
    if state not in INACTIVE_STATES:
        raise CliError(f"{action} only when group {group} is inactive, but its state is {state} "
                       f"(stop its consumers first)")


@groups.command("reset-offsets")
@broker_options
@click.argument("group")
@click.option("--topic", "topic_specs", multiple=True, metavar="TOPIC[:P,P...]",
              help="Topic (optionally some of its partitions) to reset; repeatable.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", "scenario", flag_value="earliest", help="The log start offset.")
@click.option("--to-latest", "scenario", flag_value="latest", help="The log end offset.")
@click.option("--to-current", "scenario", flag_value="current", help="The committed offset (log end if none).")
@click.option("--to-offset", type=int, default=None, help="This offset (clamped into [earliest, latest]).")
@click.option("--to-datetime", type=TimestampMs(), default=None,
              help="The first offset at or after this time (ISO-8601, e.g. 2026-01-31T12:00:00Z, or epoch ms).")
@click.option("--by-duration", type=IsoDuration(), default=None,
              help="The first offset at or after now minus this ISO-8601 duration (e.g. PT1H).")
@click.option("--shift-by", type=int, default=None, help="The committed offset plus N (negative: back).")
@click.option("--dry-run", "mode", flag_value="dry-run", default=True, help="Only print the plan (the default).")
@click.option("--execute", "mode", flag_value="execute", help="Commit the new offsets.")
@json_option
def reset_offsets(conn: BrokerConnection, group: str, topic_specs: tuple[str, ...], all_topics: bool,
                  scenario: str | None, to_offset: int | None, to_datetime: int | None, by_duration: int | None,
                  shift_by: int | None, mode: str, as_json: bool) -> None:
    """Plan (and with --execute commit) new committed offsets for GROUP; the group must be inactive."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec
    chosen = [name for name, value in (("--to-earliest/--to-latest/--to-current", scenario),
                                       ("--to-offset", to_offset), ("--to-datetime", to_datetime),
                                       ("--by-duration", by_duration), ("--shift-by", shift_by)) if value is not None]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
                               "--to-datetime, --by-duration, --shift-by")
    if bool(topic_specs) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    admin = conn.admin()
    committed = _committed(conn, admin, group)
    if all_topics:
        parts = sorted(committed)
        if not parts:
            raise CliError(f"group {group} has no committed offsets (--all-topics resets those)")
    else:
        parts = resolve_topic_partitions(conn, admin, topic_specs)
    if mode == "execute":
        _require_inactive(conn, admin, group, "offsets can be reset")
    earliest = log_offsets(conn, admin, parts, OffsetSpec.earliest())
    latest = log_offsets(conn, admin, parts, OffsetSpec.latest())

    def clamp(tp, offset: int) -> int:
        return min(max(offset, earliest[tp]), latest[tp])

    if scenario == "earliest":
        target = dict(earliest)
    elif scenario == "latest":
        target = dict(latest)
    elif scenario == "current":
        target = {tp: committed.get(tp, latest[tp]) for tp in parts}
    elif to_offset is not None:
        target = {tp: clamp(tp, to_offset) for tp in parts}
    elif shift_by is not None:
        missing = [f"{t}-{p}" for t, p in parts if (t, p) not in committed]
        if missing:
            raise CliError(f"--shift-by needs committed offsets; group {group} has none for {', '.join(missing)}")
        target = {tp: clamp(tp, committed[tp] + shift_by) for tp in parts}
    else:
        when = to_datetime if to_datetime is not None else int(time.time() * 1000) - by_duration
        by_time = log_offsets(conn, admin, parts, OffsetSpec.for_timestamp(when))
        target = {tp: (o if o >= 0 else latest[tp]) for tp, o in by_time.items()}  # none that late: the end
    rows = [{"group": group, "topic": t, "partition": p, "current_offset": committed.get((t, p)),
             "new_offset": target[(t, p)]} for t, p in parts]
    if mode == "execute":
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, target[(t, p)]) for t, p in parts])
        done = conn.wait(admin.alter_consumer_group_offsets([req], request_timeout=conn.timeout)[group],
                         f"cannot reset offsets of group {group}")
        errors = [f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in done.topic_partitions if tp.error]
        if errors:
            raise CliError(f"cannot reset offsets of group {group}: {'; '.join(errors)}")
    if as_json:
        print_json({"executed": mode == "execute", "offsets": rows})
        return
    print_rows(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
               [(r["group"], r["topic"], r["partition"], r["current_offset"], r["new_offset"]) for r in rows],
               right=("PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"))
    if mode != "execute":
        click.echo("Dry run: nothing changed; add --execute to commit these offsets.", err=True)


@groups.command("delete-offsets")
@broker_options
@click.argument("group")
@click.option("--topic", "topic_specs", multiple=True, required=True, metavar="TOPIC[:P,P...]",
              help="Topic (optionally some of its partitions) whose committed offsets to delete; repeatable.")
@json_option
def delete_offsets(conn: BrokerConnection, group: str, topic_specs: tuple[str, ...], as_json: bool) -> None:
    """Delete GROUP's committed offsets of some topics (OffsetDelete); the group must not consume them."""
    admin = conn.admin()
    parts = resolve_topic_partitions(conn, admin, topic_specs)
    committed = _committed(conn, admin, group)
    if not committed and _name(_describe_group(conn, admin, group).state) == "DEAD":
        raise CliError(f"consumer group {group} does not exist")
    from kafka import TopicPartition as KTopicPartition
    kadmin = conn.kafka_python_admin()
    try:
        result = kadmin.delete_group_offsets(group, [KTopicPartition(t, p) for t, p in parts])
    finally:
        kadmin.close()
    rows = [{"topic": tp.topic, "partition": tp.partition,
             "error": None if err.errno == 0 else err.__name__} for tp, err in sorted(result.items())]
    if as_json:
        print_json(rows)
    else:
        print_rows(("TOPIC", "PARTITION", "STATUS"),
                   [(r["topic"], r["partition"], r["error"] or "Successful") for r in rows], right=("PARTITION",))
    failed = [f"{r['topic']}-{r['partition']}: {r['error']}" for r in rows if r["error"]]
    if failed:
        raise CliError(f"cannot delete offsets of group {group}: {'; '.join(failed)}")


@groups.command("delete")
@broker_options
@click.argument("group", nargs=-1, required=True)
def delete(conn: BrokerConnection, group: tuple[str, ...]) -> None:
    """Delete groups (and their committed offsets); a group with members cannot be deleted."""
    admin = conn.admin()  # keep a reference: the futures die with the client
    futs = admin.delete_consumer_groups(list(group), request_timeout=conn.timeout)
    failed = []
    for g, f in futs.items():
        try:
            conn.wait(f, f"cannot delete group {g}")
            click.echo(f"deleted group {g}")
        except CliError as e:
            failed.append(e.format_message())
    if failed:
        raise CliError("; ".join(failed))
