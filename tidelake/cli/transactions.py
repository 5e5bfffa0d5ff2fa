"""``tidelake transactions list|describe|abort``: in the spirit of kafka-transactions.sh.

``describe`` and ``abort`` take the id as an argument or as ``--transactional-id`` (Kafka's tool's spelling).
``list`` and ``describe`` use kafka-python's admin client (ListTransactions / DescribeTransactions, routed
to the transaction coordinator via FindCoordinator). ``abort --transactional-id`` fences the id's producer
the way a restarted producer does — InitProducerId bumps the epoch and the coordinator aborts the open
transaction — so it needs no broker support beyond the transactional producer protocol.
"""
from __future__ import annotations

import functools
import time

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows

OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


def _state_name(state) -> str:
    return state.value if hasattr(state, "value") else str(state)


def transactional_id_argument(f):
    """The transactional id, positional or as ``--transactional-id`` (Kafka's kafka-transactions.sh spelling),
    passed to the command as ``transactional_id``."""
    @click.argument("positional_id", metavar="[TRANSACTIONAL_ID]", required=False)
    @click.option("--transactional-id", "option_id", default=None, metavar="ID",
                  help="The transactional id (or give it as the argument).")
    @functools.wraps(f)
    def wrapper(*args, positional_id: str | None, option_id: str | None, **kwargs):
        if positional_id is None and option_id is None:
            raise click.UsageError("give the transactional id: TRANSACTIONAL_ID or --transactional-id ID")
        if positional_id is not None and option_id is not None and positional_id != option_id:
            raise click.UsageError(f"two transactional ids: {positional_id!r} and --transactional-id {option_id!r}")
        return f(*args, transactional_id=positional_id if positional_id is not None else option_id, **kwargs)
    return wrapper


@click.group(cls=CommandGroup)
def transactions() -> None:
    """List, describe and abort transactions (transaction coordinator state)."""


@transactions.command("list")
@broker_options
@click.option("--state", "states", multiple=True, help="only these states (Ongoing, PrepareCommit, ...)")
@click.option("--producer-id", "producer_ids", type=int, multiple=True, help="only these producer ids")
@click.option("--duration-ms", type=click.IntRange(min=0), default=None,
              help="only transactions running longer than this")
@json_option
def list_cmd(conn: BrokerConnection, states: tuple[str, ...], producer_ids: tuple[int, ...],
             duration_ms: int | None, as_json: bool) -> None:
    """One line per transactional id: TRANSACTIONAL-ID, COORDINATOR, PRODUCER-ID, STATE."""
    admin = conn.kafka_python_admin()
    try:
        by_broker = admin.list_transactions(state_filters=list(states) or None,
                                            producer_id_filters=list(producer_ids) or None,
                                            duration_filter_ms=duration_ms)
    finally:
        admin.close()
    rows = sorted({(t.transactional_id, node, t.producer_id, _state_name(t.state))
                   for node, listings in by_broker.items() for t in listings})
    if as_json:
        print_json([{"transactional_id": r[0], "coordinator": r[1], "producer_id": r[2], "state": r[3]}
                    for r in rows])
        return
    print_rows(("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"), rows,
               right=("COORDINATOR", "PRODUCER-ID"))


def _describe(conn: BrokerConnection, transactional_id: str) -> dict:
    admin = conn.kafka_python_admin()
    try:
        desc = admin.describe_transactions([transactional_id])[transactional_id]
    finally:
        admin.close()
    parts = sorted((tp.topic, tp.partition) for tp in desc.topic_partitions)
    return {"transactional_id": transactional_id, "coordinator": desc.coordinator_id,
            "state": _state_name(desc.state), "producer_id": desc.producer_id,
            "producer_epoch": desc.producer_epoch, "transaction_timeout_ms": desc.transaction_timeout_ms,
            "transaction_start_time_ms": desc.transaction_start_time_ms,
            "partitions": [f"{t}-{p}" for t, p in parts]}


def _print_description(doc: dict) -> None:
    start = doc["transaction_start_time_ms"]
    duration = f"{(time.time() * 1000 - start) / 1000:.1f}s" if start >= 0 else None
    print_rows(("COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE", "TIMEOUT-MS",
                "START-TIME-MS", "DURATION", "PARTITIONS"),
               [(doc["coordinator"], doc["transactional_id"], doc["producer_id"], doc["producer_epoch"], doc["state"],
                 doc["transaction_timeout_ms"], start, duration, ",".join(doc["partitions"]) or None)])


@transactions.command("describe")
@broker_options
@transactional_id_argument
@json_option
def describe_cmd(conn: BrokerConnection, transactional_id: str, as_json: bool) -> None:
    """State, producer id/epoch, timeout, start time and partitions of one transactional id."""
    doc = _describe(conn, transactional_id)
    if as_json:
        print_json(doc)
    else:
        _print_description(doc)


@transactions.command("abort")
@broker_options
@transactional_id_argument
@json_option
def abort_cmd(conn: BrokerConnection, transactional_id: str, as_json: bool) -> None:
    """Abort the open transaction of a transactional id by fencing its producer (the epoch is bumped, so
    the old producer instance can no longer write or commit)."""
    from confluent_kafka import Producer
    before = _describe(conn, transactional_id)
    if before["state"] not in OPEN_STATES:
        raise CliError(f"transactional id {transactional_id} has no open transaction (state {before['state']})")
    producer = Producer(conn.config({"transactional.id": transactional_id}))
    conn.reachable(producer)
    producer.init_transactions(conn.timeout)
    after = _describe(conn, transactional_id)
    if as_json:
        print_json({"aborted": before, "now": after})
        return
    click.echo(f"Aborted the transaction of {transactional_id} (producer id {before['producer_id']}, "
               f"epoch {before['producer_epoch']}, partitions {','.join(before['partitions']) or '-'}).")
    _print_description(after)
