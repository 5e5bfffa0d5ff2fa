"""`tidelake produce TOPIC` and `tidelake consume TOPIC` — Kafka's console producer and consumer.

Keyed records are partitioned like Java's default partitioner, murmur2(key) mod partitions
(librdkafka's `murmur2_random`: murmur2 for keys, random for null keys), so a key lands on the
same partition whichever of the two clients wrote it.

Both take Kafka's console ``--property`` names: the producer's line reader (parse.key, key.separator,
parse.headers, headers.delimiter, headers.separator, headers.key.separator, null.marker) and the
consumer's formatter (print.key, print.value, print.headers, print.timestamp, print.partition,
print.offset, key.separator, headers.separator, line.separator, null.literal).
"""
from __future__ import annotations

import base64
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass

import click

from tidelake.cli.errors import CliError
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.progress import ProgressBar, stderr_is_terminal, stdout_is_terminal
from tidelake.cli.signals import on_stop_signals
from tidelake.cli.values import parse_pairs

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KEY_SEPARATOR = b"\t"  # Kafka's key.separator, the console producer's and consumer's default
GROUP_JOIN_TIMEOUT_S = 60.0  # with --timeout-ms: give up if the group never assigns partitions


def _flag(props: dict[str, str], name: str, default: bool) -> bool:
    """A true/false --property (Kafka's rule: any other word is refused, not read as false)."""
    value = props.get(name)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise click.BadParameter(f"{name} must be true or false, got {value!r}", param_hint="--property")
    return value.lower() == "true"


def _bytes(props: dict[str, str], name: str, default: bytes | None) -> bytes | None:
    return props[name].encode() if name in props else default


# ------------------------------------------------------------------------------------------ produce

@dataclass(frozen=True)
class LineReader:
    """Kafka's console producer line format: ``[headers<TAB>][key<SEP>]value``; a key, value or header
    value equal to the null marker is null (a value of null is a tombstone)."""

    key_separator: bytes | None = None  # None: lines carry no key (parse.key=false)
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None

    _PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
                   "headers.key.separator", "null.marker")

    @classmethod
    def from_properties(cls, props: dict[str, str], key_separator: str | None) -> "LineReader":
        unknown = sorted(set(props) - set(cls._PROPERTIES))
        if unknown:
            raise click.BadParameter(f"unknown line reader properties {', '.join(unknown)} "
                                     f"(known: {', '.join(cls._PROPERTIES)})", param_hint="--property")
        default = cls()
        parse_key = _flag(props, "parse.key", default.key_separator is not None) or key_separator is not None
        sep = key_separator.encode() if key_separator is not None else _bytes(props, "key.separator", KEY_SEPARATOR)
        return cls(key_separator=sep if parse_key else None,
                   parse_headers=_flag(props, "parse.headers", default.parse_headers),
                   headers_delimiter=_bytes(props, "headers.delimiter", default.headers_delimiter),
                   headers_separator=_bytes(props, "headers.separator", default.headers_separator),
                   headers_key_separator=_bytes(props, "headers.key.separator", default.headers_key_separator),
                   null_marker=_bytes(props, "null.marker", default.null_marker))

    def _null(self, value: bytes | None) -> bytes | None:
        return None if self.null_marker is not None and value == self.null_marker else value

    def read(self, line: bytes) -> tuple[list[tuple[str, bytes | None]], bytes | None, bytes | None]:
        """(headers, key, value) of one line (without its newline)."""
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            if self.headers_delimiter not in line:
                raise CliError(f"no headers delimiter {self.headers_delimiter.decode()!r} in line {line[:80]!r}")
            head, line = line.split(self.headers_delimiter, 1)
            for item in head.split(self.headers_separator) if head else []:
                name, sep, value = item.partition(self.headers_key_separator)
                headers.append((name.decode(), self._null(value) if sep else None))
        key = None
        if self.key_separator is not None and self.key_separator in line:
            key, line = line.split(self.key_separator, 1)
        return headers, self._null(key), self._null(line)


@click.command()
@broker_options
@click.argument("topic")
@click.option("--key-separator", default=None,
              help="Split each line at the first SEP into key and value (a line without SEP has no key); "
                   "same as --property parse.key=true --property key.separator=SEP.")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Write every record to this partition.")
@click.option("--compression-codec", "codec", type=click.Choice(CODECS), default="none", show_default=True)
@click.option("--acks", type=click.Choice(["0", "1", "all", "-1"]), default="all", show_default=True)
@click.option("--header", "headers", multiple=True, metavar="KEY=VALUE", help="Header on every record; repeatable.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="Line reader property (parse.key, key.separator, parse.headers, headers.delimiter, "
                   "headers.separator, headers.key.separator, null.marker); repeatable.")
@click.option("--producer-property", "producer_properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka producer property; repeatable.")
def produce(conn: BrokerConnection, topic: str, key_separator: str | None, partition: int | None, codec: str,
            acks: str, headers: tuple[str, ...], properties: tuple[str, ...],
            producer_properties: tuple[str, ...]) -> None:
    """Write each line of stdin to TOPIC as one record (a value equal to null.marker: a tombstone). SIGTERM/SIGINT
    stop reading; the records read so far are delivered (a second signal: exit 130 at once)."""
    on_stop_signals()
    reader = LineReader.from_properties(parse_pairs(properties, "--property"), key_separator)
    fixed_headers = [(k, v.encode()) for k, v in parse_pairs(headers, "--header").items()]
    producer = conn.producer({
        "partitioner": "murmur2_random",   # Java's default partitioner for keyed records
        "compression.type": codec, "acks": acks, "linger.ms": 5,
        # Kafka's console producer: message-send-max-retries=3, so a broker refusing every try (a full disk's
        # KAFKA_STORAGE_ERROR) is reported with its error, not as a timeout
        "retries": 3, "retry.backoff.ms": 100,
        **parse_pairs(producer_properties, "--producer-property")})
    md = conn.reachable(producer, topic)  # creates the topic where the broker auto-creates topics, as Kafka's
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None:
        raise CliError(f"cannot produce to {topic}: {_topic_error(meta)}")
    if partition is not None and partition not in meta.partitions:
        raise CliError(f"topic {topic} has no partition {partition} (it has {len(meta.partitions)})")
    failures: list[str] = []
    sent = 0

    def on_delivery(error, _msg) -> None:
        if error is not None:
            failures.append(f"{error.name()}: {error.str()}")

    kwargs = {"partition": partition} if partition is not None else {}
    size = _input_size(sys.stdin)  # a file given as stdin (< big.txt): progress in bytes of it
    with ProgressBar(f"producing to {topic}", size, unit="bytes" if size is not None else "records") as bar:
        try:
            for raw in sys.stdin.buffer:
                line = raw[:-1] if raw.endswith(b"\n") else raw
                line = line[:-1] if line.endswith(b"\r") else line
                line_headers, key, value = reader.read(line)
                record_headers = fixed_headers + line_headers
                while True:
                    try:
                        producer.produce(topic, value=value, key=key, headers=record_headers or None,
                                         on_delivery=on_delivery, **kwargs)
                        break
                    except BufferError:  # local queue full: let deliveries drain, then retry this record
                        producer.poll(0.1)
                sent += 1
                bar.advance(len(raw) if size is not None else 1)
                producer.poll(0)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop reading, deliver what was read (Kafka's close())
            pass
    remaining = producer.flush(conn.timeout + 1)
    if remaining or failures:
        # confluent-kafka passes on only the error's name: each refused record's reason (KIP-467) is in the broker's log
        hint = "; the broker's log names each refused record and why" \
            if any(f.startswith("INVALID_RECORD") for f in failures) else ""
        raise CliError(f"{len(failures) + remaining} of {sent} records not delivered to {topic}"
                       + (f": {failures[0]}{hint}" if failures else f" within {conn.timeout:g}s (--timeout)"))
    click.echo(f"Produced {sent} records to {topic}.", err=True)


def _input_size(stream) -> int | None:
    """The size of ``stream`` when it is a regular file (not a pipe or a terminal), else None."""
    import stat
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


# ------------------------------------------------------------------------------------------ consume

@dataclass(frozen=True)
class RecordFormatter:
    """Kafka's DefaultMessageFormatter (fields in its order: timestamp, partition, offset, headers, key,
    value), or one JSON object per record."""

    as_json: bool = False
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = KEY_SEPARATOR
    headers_separator: bytes = b","
    line_separator: bytes = b"\n"
    null_literal: bytes = b"null"

    _PROPERTIES = ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key",
                   "print.value", "key.separator", "headers.separator", "line.separator", "null.literal")

    @classmethod
    def from_options(cls, formatter: str, props: dict[str, str], flags: dict[str, bool],
                     separator: str | None) -> "RecordFormatter":
        unknown = sorted(set(props) - set(cls._PROPERTIES))
        if unknown:
            raise click.BadParameter(f"unknown formatter properties {', '.join(unknown)} "
                                     f"(known: {', '.join(cls._PROPERTIES)})", param_hint="--property")

        default = cls()

        def flag(name: str, field_default: bool) -> bool:
            return flags.get(name, False) or _flag(props, name, field_default)

        sep = separator.encode() if separator is not None else _bytes(props, "key.separator", default.key_separator)
        return cls(as_json=formatter == "json", print_timestamp=flag("print.timestamp", default.print_timestamp),
                   print_partition=flag("print.partition", default.print_partition),
                   print_offset=flag("print.offset", default.print_offset),
                   print_headers=flag("print.headers", default.print_headers),
                   print_key=flag("print.key", default.print_key), print_value=flag("print.value", default.print_value),
                   key_separator=sep, headers_separator=_bytes(props, "headers.separator", default.headers_separator),
                   line_separator=_bytes(props, "line.separator", default.line_separator),
                   null_literal=_bytes(props, "null.literal", default.null_literal))

    def format(self, msg) -> bytes:
        from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME
        ts_type, ts = msg.timestamp()
        ts_name = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}.get(
            ts_type, "NoTimestampType")
        if self.as_json:
            doc = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                   "timestamp": ts, "timestamp_type": ts_name,
                   "headers": [{"key": k, **_json_bytes("value", v)} for k, v in msg.headers() or []],
                   **_json_bytes("key", msg.key()), **_json_bytes("value", msg.value())}
            return json.dumps(doc, ensure_ascii=False).encode() + b"\n"
        null = self.null_literal
        fields: list[bytes] = []
        if self.print_timestamp:
            fields.append(f"{ts_name}:{ts}".encode())
        if self.print_partition:
            fields.append(f"Partition:{msg.partition()}".encode())
        if self.print_offset:
            fields.append(f"Offset:{msg.offset()}".encode())
        if self.print_headers:
            hs = msg.headers() or []
            fields.append(self.headers_separator.join(k.encode() + b":" + (v if v is not None else null)
                                                      for k, v in hs) if hs else b"NO_HEADERS")
        if self.print_key:
            fields.append(msg.key() if msg.key() is not None else null)
        if self.print_value:
            fields.append(msg.value() if msg.value() is not None else null)
        return self.key_separator.join(fields) + self.line_separator


def _json_bytes(name: str, value: bytes | None) -> dict:
    """``{name: text}`` for UTF-8 bytes (null for None), ``{name + "_base64": ...}`` for anything else."""
    if value is None:
        return {name: None}
    try:
        return {name: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_base64": base64.b64encode(value).decode()}


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


def _topic_error(meta) -> str:
    """Why a topic's metadata is unusable, with Kafka's error name (TOPIC_AUTHORIZATION_FAILED, ...)."""
    if meta is None:
        return "unknown topic"
    return f"{meta.error.name()}: {meta.error.str()}"


@click.command()
@broker_options
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (default: only new records).")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Read only this partition.")
@click.option("--offset", default=None, help="With --partition: start offset (number, earliest or latest).")
@click.option("--max-messages", type=click.IntRange(min=1), default=None, help="Exit after this many records.")
@click.option("--group", default=None, help="Consume as a member of this consumer group, committing offsets.")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True,
              help="read_committed: only records of committed transactions, up to the last stable offset.")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=None,
              help="Exit when no record arrives for this long once partitions are assigned "
                   "(default: wait forever).")
@click.option("--formatter", type=click.Choice(["default", "json"]), default="default", show_default=True,
              help="json: one object per record (topic, partition, offset, timestamp, headers, key, value).")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="Formatter property (print.key, print.value, print.headers, print.timestamp, print.partition, "
                   "print.offset, key.separator, headers.separator, line.separator, null.literal); repeatable.")
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka consumer property; repeatable.")
@click.option("--print-key", is_flag=True, help="Print the key before the value (print.key=true).")
@click.option("--print-partition", is_flag=True, help="Print Partition:P before the value (print.partition=true).")
@click.option("--print-offset", is_flag=True, help="Print Offset:O before the value (print.offset=true).")
@click.option("--print-timestamp", is_flag=True,
              help="Print CreateTime:T / LogAppendTime:T before the value (print.timestamp=true).")
@click.option("--print-headers", is_flag=True, help="Print k:v,k:v headers before the value (print.headers=true).")
@click.option("--separator", default=None, help="Between the printed fields (key.separator; default TAB).")
def consume(conn: BrokerConnection, topic: str, from_beginning: bool, partition: int | None, offset: str | None,
            max_messages: int | None, group: str | None, isolation_level: str, timeout_ms: int | None,
            formatter: str, properties: tuple[str, ...], consumer_properties: tuple[str, ...], print_key: bool,
            print_partition: bool, print_offset: bool, print_timestamp: bool, print_headers: bool,
            separator: str | None) -> None:
    """Print the records of TOPIC, one per line. SIGTERM/SIGINT: close (with --group: commit and leave the group at
    once), print the count, exit 0."""
    on_stop_signals()
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition
    fmt = RecordFormatter.from_options(
        formatter, parse_pairs(properties, "--property"),
        {"print.key": print_key, "print.partition": print_partition, "print.offset": print_offset,
         "print.timestamp": print_timestamp, "print.headers": print_headers}, separator)
    start = _parse_offset(offset)
    if start is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if group is not None and partition is not None:
        raise click.UsageError("--group and --partition are exclusive (a group member is assigned partitions)")
    if start is None:
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END

    conf = {"enable.partition.eof": False, "auto.offset.reset": "earliest" if from_beginning else "latest",
            "isolation.level": isolation_level}
    if group is not None:
        conf.update({"group.id": group, "enable.auto.commit": True})
    else:
        # librdkafka insists on a group id; without --group we assign partitions and never commit.
        conf.update({"group.id": f"tidelake-console-{uuid.uuid4()}", "enable.auto.commit": False})
    conf.update(parse_pairs(consumer_properties, "--consumer-property"))
    consumer, md = conn.consumer(conf, topic)
    tmd = md.topics.get(topic)
    out = sys.stdout.buffer
    count = 0
    # records on stdout, the bar on stderr: only when they are not the same terminal
    bar = ProgressBar(f"consuming {topic}", max_messages,
                      enabled=max_messages is not None and stderr_is_terminal() and not stdout_is_terminal())
    try:
        if tmd is None or tmd.error is not None:
            raise CliError(f"cannot consume {topic}: {_topic_error(tmd)}")
        assigned_at: list[float] = []  # when the partitions were assigned; --timeout-ms counts from then
        if group is not None:
            conn.wait_for_group_coordinator(group)
            consumer.subscribe([topic], on_assign=lambda _c, _parts: assigned_at.append(time.monotonic()))
        else:
            if partition is not None and partition not in tmd.partitions:
                raise CliError(f"topic {topic} has no partition {partition} (it has {len(tmd.partitions)})")
            partitions = [partition] if partition is not None else sorted(tmd.partitions)
            consumer.assign([TopicPartition(topic, p, start) for p in partitions])
            assigned_at.append(time.monotonic())

        started = time.monotonic()
        last_record: float | None = None
        bar.__enter__()
        while max_messages is None or count < max_messages:
            msg = consumer.poll(0.2)
            if msg is None:
                if timeout_ms is not None:
                    since = last_record or (assigned_at[0] if assigned_at else None)
                    if since is not None and (time.monotonic() - since) * 1000 >= timeout_ms:
                        break
                    if since is None and time.monotonic() - started > GROUP_JOIN_TIMEOUT_S + timeout_ms / 1000:
                        raise CliError(f"no partitions of {topic} assigned to group {group} "
                                       f"within {GROUP_JOIN_TIMEOUT_S:.0f}s")
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                if not msg.error().retriable() or msg.error().fatal():
                    raise CliError(f"consume {topic}: {msg.error().str()}")
                continue
            last_record = time.monotonic()
            out.write(fmt.format(msg))
            out.flush()
            count += 1
            bar.advance()
    except (KeyboardInterrupt, BrokenPipeError):  # Ctrl-C, or the reader of our stdout went away (| head)
        pass
    finally:
        bar.__exit__(None, None, None)  # gone before the summary line
        consumer.close()  # with --group: commits the consumed offsets and leaves the group
    click.echo(f"Processed a total of {count} messages", err=True)
