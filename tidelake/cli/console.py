"""`tidelake produce TOPIC` and `tidelake consume TOPIC` — Kafka's console producer and consumer.

Keyed records are partitioned like Java's default partitioner, murmur2(key) mod partitions
(librdkafka's `murmur2_random`: murmur2 for keys, random for null keys), so a key lands on the
same partition whichever of the two clients wrote it.
"""
from __future__ import annotations

import time
import uuid

import click

from tidelake.cli._kafka import bootstrap_option, client_config, err, kafka_error_message, parse_pairs, stdout_bytes

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
GROUP_JOIN_TIMEOUT_S = 60.0  # with --timeout-ms: give up if the group never assigns partitions


@click.command()
@bootstrap_option
@click.argument("topic")
@click.option("--key-separator", default=None,
              help="Split each line at the first SEP into key and value (a line without SEP has no key).")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Write every record to this partition.")
@click.option("--compression-codec", "codec", type=click.Choice(CODECS), default="none", show_default=True)
@click.option("--acks", type=click.Choice(["0", "1", "all", "-1"]), default="all", show_default=True)
@click.option("--header", "headers", multiple=True, metavar="KEY=VALUE", help="Header on every record; repeatable.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="Extra librdkafka producer property; repeatable.")
def produce(bootstrap: str, topic: str, key_separator: str | None, partition: int | None, codec: str, acks: str,
            headers: tuple[str, ...], properties: tuple[str, ...]) -> None:
    """Write each line of stdin to TOPIC as one record."""
    from confluent_kafka import Producer
    producer = Producer(client_config(bootstrap, {
        "partitioner": "murmur2_random",   # Java's default partitioner for keyed records
        "compression.type": codec, "acks": acks, "linger.ms": 5,
        **parse_pairs(properties, "--property")}))
    header_list = list(parse_pairs(headers, "--header").items())
    failures: list[str] = []
    sent = 0

    def on_delivery(error, _msg) -> None:
        if error is not None:
            failures.append(error.str())

    stdin = click.get_binary_stream("stdin")
    sep = key_separator.encode() if key_separator is not None else None
    for raw in stdin:
        line = raw.rstrip(b"\r\n") if raw.endswith(b"\n") else raw
        key, value = None, line
        if sep is not None and sep in line:
            key, value = line.split(sep, 1)
        kwargs = {"partition": partition} if partition is not None else {}
        if header_list:
            kwargs["headers"] = header_list
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain, then retry this record
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or failures:
        raise click.ClickException(f"{len(failures) + remaining} of {sent} records not delivered"
                                   + (f": {failures[0]}" if failures else " (timed out)"))
    err(f"Produced {sent} records to {topic}.")


def _parse_offset(value: str | None) -> int | None:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END
    if value is None:
        return None
    if value == "earliest":
        return OFFSET_BEGINNING
    if value == "latest":
        return OFFSET_END
    try:
        offset = int(value)
    except ValueError:
        raise click.BadParameter("expected a number, 'earliest' or 'latest'", param_hint="--offset") from None
    if offset < 0:
        raise click.BadParameter("must be >= 0", param_hint="--offset")
    return offset


@click.command()
@bootstrap_option
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (default: only new records).")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Read only this partition.")
@click.option("--offset", default=None, help="With --partition: start offset (number, earliest or latest).")
@click.option("--max-messages", type=click.IntRange(min=1), default=None, help="Exit after this many records.")
@click.option("--group", default=None, help="Consume as a member of this consumer group, committing offsets.")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=None,
              help="Exit when no record arrives for this long once partitions are assigned "
                   "(default: wait forever).")
@click.option("--print-key", is_flag=True, help="Print the key before the value.")
@click.option("--print-partition", is_flag=True, help="Print Partition:P before the value.")
@click.option("--print-offset", is_flag=True, help="Print Offset:O before the value.")
@click.option("--print-timestamp", is_flag=True, help="Print CreateTime:T / LogAppendTime:T before the value.")
@click.option("--print-headers", is_flag=True, help="Print k:v,k:v headers before the value.")
@click.option("--separator", default="\t", show_default="TAB", help="Between the printed fields.")
def consume(bootstrap: str, topic: str, from_beginning: bool, partition: int | None, offset: str | None,
            max_messages: int | None, group: str | None, timeout_ms: int | None, print_key: bool,
            print_partition: bool, print_offset: bool, print_timestamp: bool, print_headers: bool,
            separator: str) -> None:
    """Print the records of TOPIC, one per line."""
    from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,
                                 Consumer, KafkaError, TopicPartition)
    start = _parse_offset(offset)
    if start is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if group is not None and partition is not None:
        raise click.UsageError("--group and --partition are exclusive (a group member is assigned partitions)")
    if start is None:
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END

    conf = {"enable.partition.eof": False, "auto.offset.reset": "earliest" if from_beginning else "latest"}
    if group is not None:
        conf.update({"group.id": group, "enable.auto.commit": True})
    else:
        # librdkafka insists on a group id; without --group we assign partitions and never commit.
        conf.update({"group.id": f"tidelake-console-{uuid.uuid4()}", "enable.auto.commit": False})
    consumer = Consumer(client_config(bootstrap, conf))
    out = stdout_bytes()
    sep = separator.encode()
    count = 0
    try:
        assigned_at: list[float] = []  # when the partitions were assigned; --timeout-ms counts from then
        if group is not None:
            consumer.subscribe([topic], on_assign=lambda _c, _parts: assigned_at.append(time.monotonic()))
        else:
            if partition is not None:
                partitions = [partition]
            else:
                md = consumer.list_topics(topic, timeout=30)
                tmd = md.topics.get(topic)
                if tmd is None or tmd.error is not None:
                    raise click.ClickException(f"cannot consume {topic}: {tmd.error if tmd else 'unknown topic'}")
                partitions = sorted(tmd.partitions)
            consumer.assign([TopicPartition(topic, p, start) for p in partitions])
            assigned_at.append(time.monotonic())

        started = time.monotonic()
        last_record: float | None = None
        while max_messages is None or count < max_messages:
            msg = consumer.poll(0.2)
            if msg is None:
                if timeout_ms is not None:
                    since = last_record or (assigned_at[0] if assigned_at else None)
                    if since is not None and (time.monotonic() - since) * 1000 >= timeout_ms:
                        break
                    if since is None and time.monotonic() - started > GROUP_JOIN_TIMEOUT_S + timeout_ms / 1000:
                        raise click.ClickException(f"no partitions of {topic} assigned to group {group} "
                                                   f"within {GROUP_JOIN_TIMEOUT_S:.0f}s")
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                if not msg.error().retriable() or msg.error().fatal():
                    raise click.ClickException(f"consume {topic}: {msg.error().str()}")
                err(f"warning: {msg.error().str()}")
                continue
            last_record = time.monotonic()
            fields: list[bytes] = []
            if print_timestamp:
                ts_type, ts = msg.timestamp()
                name = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}.get(
                    ts_type, "NoTimestampType")
                fields.append(f"{name}:{ts}".encode())
            if print_partition:
                fields.append(f"Partition:{msg.partition()}".encode())
            if print_offset:
                fields.append(f"Offset:{msg.offset()}".encode())
            if print_headers:
                hs = msg.headers() or []
                fields.append(b",".join(k.encode() + b":" + (v if v is not None else b"null") for k, v in hs)
                              if hs else b"NO_HEADERS")
            if print_key:
                fields.append(msg.key() if msg.key() is not None else b"null")
            fields.append(msg.value() if msg.value() is not None else b"null")
            out.write(sep.join(fields) + b"\n")
            out.flush()
            count += 1
    except (KeyboardInterrupt, BrokenPipeError):  # Ctrl-C, or the reader of our stdout went away (| head)
        pass
    except click.ClickException:
        raise
    except Exception as e:
        raise click.ClickException(f"consume {topic}: {kafka_error_message(e)}") from e
    finally:
        consumer.close()  # with --group: commits the consumed offsets and leaves the group
    err(f"Processed a total of {count} messages")
