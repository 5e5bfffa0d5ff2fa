"""``tidelake share-groups``: list, describe (START-OFFSET / LAG, ``--members``, ``--state``), reset-offsets,
delete-offsets, delete — Kafka 4.x's kafka-share-groups commands and option names, for KIP-932 share groups.

``reset-offsets`` only prints the plan unless ``--execute`` is given (``--dry-run`` is the default), and refuses
to move the start offsets of a group that has members, as Kafka's tool does. The share-group requests are sent by
:mod:`tidelake.kafka_admin.share_groups` (opened by :mod:`tidelake.cli.share_admin`); listing, log offsets and
deleting a group go through the Kafka clients' admin APIs.
"""
from __future__ import annotations

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows
from tidelake.cli.share_admin import share_group_admin
from tidelake.cli.topic_offsets import log_offsets, resolve_topic_partitions
from tidelake.cli.values import TimestampMs
from tidelake.kafka_admin.share_groups import ShareGroupAdmin, ShareGroupDescription

SHARE_TYPE = "share"


@click.group("share-groups", cls=CommandGroup)
def share_groups() -> None:
    """Share groups (KIP-932 queues): list, describe, reset offsets, delete offsets, delete."""


@share_groups.command("list")
@broker_options
@click.option("--state", "states", default=None, metavar="STATE[,STATE...]",
              help="Only groups in these states (Empty, Stable, Dead), comma-separated.")
@json_option
def list_share_groups(conn: BrokerConnection, states: str | None, as_json: bool) -> None:
    """Every share group with its state."""
    wanted = [s.strip() for s in states.split(",") if s.strip()] if states else None
    admin = conn.kafka_python_admin()  # asks every broker, as `groups list`
    try:
        listed = admin.list_groups(states_filter=wanted, types_filter=[SHARE_TYPE])
    finally:
        admin.close()
    rows = [{"group": g["group_id"], "state": g.get("group_state"), "type": g.get("group_type")}
            for g in sorted(listed, key=lambda g: g["group_id"])]
    if as_json:
        print_json(rows)
        return
    print_rows(("GROUP", "STATE", "TYPE"), [(r["group"], r["state"], r["type"]) for r in rows])


def _existing(admin: ShareGroupAdmin, group: str) -> ShareGroupDescription:
    desc = admin.describe(group)
    if desc is None:
        raise CliError(f"share group {group} does not exist")
    return desc


@share_groups.command("describe")
@broker_options
@click.argument("group")
@click.option("--offsets", "view", flag_value="offsets", default=True,
              help="Per partition: START-OFFSET and LAG (the default).")
@click.option("--members", "view", flag_value="members", help="Members: id, client id, host, assignment, epoch.")
@click.option("--state", "view", flag_value="state", help="State, epochs, coordinator, member count.")
@json_option
def describe(conn: BrokerConnection, group: str, view: str, as_json: bool) -> None:
    """GROUP's start offsets and lag per partition, or (--members) its members, or (--state) its state."""
    with share_group_admin(conn) as admin:
        desc = _existing(admin, group)
        start_offsets = admin.start_offsets(group) if view == "offsets" else []
    if view == "state":
        doc = {"group": desc.group, "coordinator": desc.coordinator, "state": desc.state,
               "group_epoch": desc.group_epoch, "assignment_epoch": desc.assignment_epoch,
               "assignor": desc.assignor, "members": len(desc.members)}
        if as_json:
            print_json(doc)
            return
        print_rows(("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"),
                   [(desc.group, desc.coordinator, desc.state, desc.group_epoch, desc.assignment_epoch,
                     len(desc.members))], right=("GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"))
        return
    if view == "members":
        rows = [{"group": desc.group, "consumer_id": m.member_id, "host": m.host, "client_id": m.client_id,
                 "partitions": len(m.assignment), "assignment": [f"{t}:{p}" for t, p in m.assignment],
                 "member_epoch": m.member_epoch} for m in desc.members]
        if as_json:
            print_json(rows)
            return
        print_rows(("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT"),
                   [(r["group"], r["consumer_id"], r["host"], r["client_id"], r["partitions"], r["member_epoch"],
                     ",".join(r["assignment"]) or None) for r in rows], right=("#PARTITIONS", "MEMBER-EPOCH"))
        if not rows:
            click.echo(f"Share group {group} has no active members.", err=True)
        return
    rows = [{"group": desc.group, "topic": s.topic, "partition": s.partition,
             "leader_epoch": s.leader_epoch if s.leader_epoch >= 0 else None,
             "start_offset": s.start_offset if s.start_offset >= 0 else None,
             "lag": s.lag if s.lag >= 0 else None} for s in start_offsets]
    if as_json:
        print_json({"group": desc.group, "state": desc.state, "partitions": rows})
        return
    print_rows(("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"),
               [[r[k] for k in ("group", "topic", "partition", "leader_epoch", "start_offset", "lag")]
                for r in rows], right=("PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"))


@share_groups.command("reset-offsets")
@broker_options
@click.argument("group")
@click.option("--topic", "topic_specs", multiple=True, metavar="TOPIC[:P,P...]",
              help="Topic (optionally some of its partitions) to reset; repeatable.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has start offsets for.")
@click.option("--to-earliest", "scenario", flag_value="earliest", help="The log start offset.")
@click.option("--to-latest", "scenario", flag_value="latest", help="The log end offset.")
@click.option("--to-offset", type=int, default=None, help="This offset (clamped into [earliest, latest]).")
@click.option("--to-datetime", type=TimestampMs(), default=None,
              help="The first offset at or after this time (ISO-8601, e.g. 2026-01-31T12:00:00Z, or epoch ms).")
@click.option("--dry-run", "mode", flag_value="dry-run", default=True, help="Only print the plan (the default).")
@click.option("--execute", "mode", flag_value="execute", help="Set the new start offsets.")
@json_option
def reset_offsets(conn: BrokerConnection, group: str, topic_specs: tuple[str, ...], all_topics: bool,
                  scenario: str | None, to_offset: int | None, to_datetime: int | None, mode: str,
                  as_json: bool) -> None:
    """Plan (and with --execute set) new start offsets for GROUP; the group must have no members."""
    from confluent_kafka.admin import OffsetSpec
    chosen = [name for name, value in (("--to-earliest/--to-latest", scenario), ("--to-offset", to_offset),
                                       ("--to-datetime", to_datetime)) if value is not None]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    if bool(topic_specs) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    with share_group_admin(conn) as admin:
        kafka_admin = conn.admin()
        desc = admin.describe(group)
        current = ({(s.topic, s.partition): s.start_offset for s in admin.start_offsets(group)}
                   if desc is not None else {})
        if all_topics:
            parts = sorted(current)
            if not parts:
                raise CliError(f"share group {group} has no start offsets (--all-topics resets those)")
        else:
            parts = resolve_topic_partitions(conn, kafka_admin, topic_specs)
        if mode == "execute" and desc is not None and desc.members:
            raise CliError(f"offsets can be reset only when share group {group} has no members, but it has "
                           f"{len(desc.members)} (state {desc.state}; stop its consumers first)")
        earliest = log_offsets(conn, kafka_admin, parts, OffsetSpec.earliest())
        latest = log_offsets(conn, kafka_admin, parts, OffsetSpec.latest())
        if scenario == "earliest":
            target = dict(earliest)
        elif scenario == "latest":
            target = dict(latest)
        elif to_offset is not None:
            target = {tp: min(max(to_offset, earliest[tp]), latest[tp]) for tp in parts}
        else:
            by_time = log_offsets(conn, kafka_admin, parts, OffsetSpec.for_timestamp(to_datetime))
            target = {tp: (o if o >= 0 else latest[tp]) for tp, o in by_time.items()}  # none that late: the end
        if mode == "execute":
            admin.alter_start_offsets(group, target)
    rows = [{"group": group, "topic": t, "partition": p, "start_offset": current.get((t, p)),
             "new_start_offset": target[(t, p)]} for t, p in parts]
    if as_json:
        print_json({"executed": mode == "execute", "offsets": rows})
        return
    print_rows(("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"),
               [(r["group"], r["topic"], r["partition"], r["start_offset"], r["new_start_offset"]) for r in rows],
               right=("PARTITION", "START-OFFSET", "NEW-START-OFFSET"))
    if mode != "execute":
        click.echo("Dry run: nothing changed; add --execute to set these start offsets.", err=True)


@share_groups.command("delete-offsets")
@broker_options
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, metavar="TOPIC",
              help="Topic whose start offsets to delete (all its partitions); repeatable.")
@json_option
def delete_offsets(conn: BrokerConnection, group: str, topics: tuple[str, ...], as_json: bool) -> None:
    """Delete GROUP's start offsets of whole topics; the group must not be consuming them."""
    with share_group_admin(conn) as admin:
        _existing(admin, group)
        result = admin.delete_start_offsets(group, sorted(set(topics)))
    rows = [{"topic": t, "error": err} for t, err in sorted(result.items())]
    if as_json:
        print_json(rows)
    else:
        print_rows(("TOPIC", "STATUS"), [(r["topic"], r["error"] or "Successful") for r in rows])
    failed = [f"{r['topic']}: {r['error']}" for r in rows if r["error"]]
    if failed:
        raise CliError(f"cannot delete offsets of share group {group}: {'; '.join(failed)}")


@share_groups.command("delete")
@broker_options
@click.argument("group", nargs=-1, required=True)
def delete(conn: BrokerConnection, group: tuple[str, ...]) -> None:
    """Delete share groups (and their start offsets); a group with members cannot be deleted."""
    with share_group_admin(conn) as admin:
        for g in group:  # a consumer group of that name is not deleted by this command
            _existing(admin, g)
    kafka_admin = conn.admin()  # keep a reference: the futures die with the client
    futs = kafka_admin.delete_consumer_groups(list(group), request_timeout=conn.timeout)
    failed = []
    for g, f in futs.items():
        try:
            conn.wait(f, f"cannot delete share group {g}")
            click.echo(f"deleted share group {g}")
        except CliError as e:
            failed.append(e.format_message())
    if failed:
        raise CliError("; ".join(failed))
