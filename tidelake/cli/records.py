"""`tidelake records delete` — Kafka's kafka-delete-records.sh: move partitions' log start offsets
forward (DeleteRecords), so records before them are no longer readable."""
from __future__ import annotations

import json

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows


@click.group(cls=CommandGroup)
def records() -> None:
    """Delete records before an offset (kafka-delete-records)."""


def _read_offset_json(path: str) -> list[tuple[str, int, int]]:
    """kafka-delete-records' file: {"partitions": [{"topic": T, "partition": P, "offset": O}], "version": 1};
    offset -1 means the high watermark (everything)."""
    with open(path, encoding="utf-8") as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise CliError(f"malformed JSON in {path}: {e}") from None
    try:
        return [(str(p["topic"]), int(p["partition"]), int(p["offset"])) for p in doc["partitions"]]
    except (KeyError, TypeError, ValueError) as e:
        raise CliError(f"{path}: expected {{\"partitions\": [{{\"topic\", \"partition\", \"offset\"}}]}} "
                       f"({type(e).__name__}: {e})") from None


@records.command()
@broker_options
@click.option("--offset-json-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}')
@click.option("--topic", default=None, help="Instead of the file: this topic ...")
@click.option("--partition", "partitions", type=click.IntRange(min=0), multiple=True,
              help="... these partitions (repeatable; default all) ...")
@click.option("--offset", type=click.IntRange(min=-1), default=None,
              help="... up to (excluding) this offset; -1: the high watermark.")
@json_option
def delete(conn: BrokerConnection, offset_json_file: str | None, topic: str | None, partitions: tuple[int, ...],
           offset: int | None, as_json: bool) -> None:
    """Delete the records before the given offsets; prints each partition's new low watermark."""
    from confluent_kafka import OFFSET_END, TopicPartition
    if (offset_json_file is None) == (topic is None):
        raise click.UsageError("give --offset-json-file, or --topic with --offset")
    if topic is not None and offset is None:
        raise click.UsageError("--topic needs --offset")
    wanted = _read_offset_json(offset_json_file) if offset_json_file is not None else None
    admin = conn.admin()
    if wanted is None:
        md = conn.reachable(admin)  # all topics: asking for one may create it
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None:
            raise CliError(f"unknown topic {topic}")
        missing = sorted(set(partitions) - set(meta.partitions))
        if missing:
            raise CliError(f"topic {topic} has no partition {', '.join(map(str, missing))}")
        wanted = [(topic, p, offset) for p in (sorted(partitions) or sorted(meta.partitions))]
    tps = [TopicPartition(t, p, OFFSET_END if o == -1 else o) for t, p, o in wanted]
    futures = admin.delete_records(tps, request_timeout=conn.timeout, operation_timeout=conn.timeout)
    rows = []
    for tp in tps:
        fut = next(f for k, f in futures.items() if (k.topic, k.partition) == (tp.topic, tp.partition))
        result = conn.wait(fut, f"cannot delete records of {tp.topic}-{tp.partition}")
        rows.append({"topic": tp.topic, "partition": tp.partition, "low_watermark": result.low_watermark})
    if as_json:
        print_json(rows)
        return
    print_rows(("TOPIC", "PARTITION", "LOW-WATERMARK"),
               [(r["topic"], r["partition"], r["low_watermark"]) for r in rows], right=("PARTITION", "LOW-WATERMARK"))
