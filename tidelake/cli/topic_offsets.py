"""What the group commands share about topics: ``--topic TOPIC[:P,P...]`` resolved against the cluster's
metadata, and the log offsets (earliest, latest, at a time) of some partitions through ListOffsets."""
from __future__ import annotations

import click

from tidelake.cli.errors import CliError
from tidelake.cli.kafka_client import BrokerConnection


def resolve_topic_partitions(conn: BrokerConnection, admin, specs: tuple[str, ...]) -> list[tuple[str, int]]:
    """kafka-consumer-groups' --topic values: 'topic' (every partition) or 'topic:0,2'."""
    out = []
    md = conn.reachable(admin)
    for spec in specs:
        topic, _, parts = spec.partition(":")
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None:
            raise CliError(f"unknown topic {topic}")
        if parts:
            try:
                wanted = sorted({int(p) for p in parts.split(",")})
            except ValueError:
                raise click.BadParameter(f"expected TOPIC or TOPIC:P,P..., got {spec!r}", param_hint="--topic") \
                    from None
            missing = [p for p in wanted if p not in meta.partitions]
            if missing:
                raise CliError(f"topic {topic} has no partition {', '.join(map(str, missing))}")
        else:
            wanted = sorted(meta.partitions)
        out += [(topic, p) for p in wanted]
    return sorted(set(out))


def log_offsets(conn: BrokerConnection, admin, partitions, spec) -> dict[tuple[str, int], int]:
    """The offset ``spec`` (an OffsetSpec: earliest, latest, for a timestamp) of each partition."""
    from confluent_kafka import TopicPartition
    if not partitions:
        return {}
    futs = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions}, request_timeout=conn.timeout)
    return {(tp.topic, tp.partition): conn.wait(f, f"cannot list offsets of {tp.topic}-{tp.partition}").offset
            for tp, f in futs.items()}
