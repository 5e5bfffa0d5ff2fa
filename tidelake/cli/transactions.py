"""``tidelake transactions list|describe``: in the spirit of kafka-transactions.sh.

Talks to any Kafka-protocol broker through kafka-python's admin client (ListTransactions /
DescribeTransactions, routed to the transaction coordinator via FindCoordinator).
"""
from __future__ import annotations

import json
import time

import click

_BOOTSTRAP = click.option("--bootstrap-server", "-b", default="127.0.0.1:9092", show_default=True,
                          envvar="TIDELAKE_BOOTSTRAP_SERVER", help="host:port of a broker")


def _admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="tidelake-transactions",
                            request_timeout_ms=15000)


def _state_name(state) -> str:
    return getattr(state, "value", state)


@click.group()
def transactions() -> None:
    """List and describe transactions (transaction coordinator state)."""


@transactions.command("list")
@_BOOTSTRAP
@click.option("--state", "states", multiple=True, help="only these states (Ongoing, PrepareCommit, ...)")
@click.option("--producer-id", "producer_ids", type=int, multiple=True, help="only these producer ids")
@click.option("--duration-ms", type=int, default=None, help="only transactions running longer than this")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def list_cmd(bootstrap_server: str, states: tuple[str, ...], producer_ids: tuple[int, ...],
             duration_ms: int | None, as_json: bool) -> None:
    """One line per transactional id: TRANSACTIONAL-ID, PRODUCER-ID, STATE."""
    admin = _admin(bootstrap_server)
    try:
        by_broker = admin.list_transactions(state_filters=list(states) or None,
                                            producer_id_filters=list(producer_ids) or None,
                                            duration_filter_ms=duration_ms)
    finally:
        admin.close()
    rows = sorted({(t.transactional_id, t.producer_id, _state_name(t.state), node)
                   for node, listings in by_broker.items() for t in listings})
    if as_json:
        click.echo(json.dumps([{"transactional_id": r[0], "producer_id": r[1], "state": r[2], "coordinator": r[3]}
                               for r in rows]))
        return
    width = max([len("TRANSACTIONAL-ID")] + [len(r[0]) for r in rows])
    click.echo(f"{'TRANSACTIONAL-ID':<{width}}  {'COORDINATOR':>11}  {'PRODUCER-ID':>11}  STATE")
    for txn_id, pid, state, node in rows:
        click.echo(f"{txn_id:<{width}}  {node:>11}  {pid:>11}  {state}")


@transactions.command("describe")
@_BOOTSTRAP
@click.argument("transactional_id")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def describe_cmd(bootstrap_server: str, transactional_id: str, as_json: bool) -> None:
    """State, producer id/epoch, timeout, start time and partitions of one transactional id."""
    from kafka.errors import KafkaError
    admin = _admin(bootstrap_server)
    try:
        desc = admin.describe_transactions([transactional_id])[transactional_id]
    except KafkaError as e:
        raise click.ClickException(f"{transactional_id}: {type(e).__name__}: {e}") from e
    finally:
        admin.close()
    parts = sorted((tp.topic, tp.partition) for tp in desc.topic_partitions)
    doc = {"transactional_id": transactional_id, "coordinator": desc.coordinator_id,
           "state": _state_name(desc.state), "producer_id": desc.producer_id,
           "producer_epoch": desc.producer_epoch, "transaction_timeout_ms": desc.transaction_timeout_ms,
           "transaction_start_time_ms": desc.transaction_start_time_ms,
           "partitions": [f"{t}-{p}" for t, p in parts]}
    if as_json:
        click.echo(json.dumps(doc))
        return
    start = desc.transaction_start_time_ms
    duration = f"{(time.time() * 1000 - start) / 1000:.1f}s" if start >= 0 else "-"
    click.echo("COORDINATOR  TRANSACTIONAL-ID  PRODUCER-ID  PRODUCER-EPOCH  STATE  TIMEOUT-MS  "
               "START-TIME-MS  DURATION  PARTITIONS")
    click.echo(f"{desc.coordinator_id}  {transactional_id}  {desc.producer_id}  {desc.producer_epoch}  "
               f"{doc['state']}  {desc.transaction_timeout_ms}  {start}  {duration}  "
               f"{','.join(doc['partitions']) or '-'}")
