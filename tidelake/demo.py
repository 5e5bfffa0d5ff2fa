"""`make demo`: the end-to-end demo on embedded defaults.

Starts an embedded broker on a free port with its data in a directory it names, creates a topic, produces
and consumes a few thousand records with a real Kafka client (librdkafka), and prints what happened.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

console = Console()


def run_broker_demo(data_dir: Path, records: int = 5000, partitions: int = 3) -> dict:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from tidelake.broker import EmbeddedBroker

    topic = "demo-orders"
    with EmbeddedBroker(data_dir / "broker", port=0) as broker:
        bootstrap = broker.bootstrap_servers
        console.print(f"[bold]broker[/] listening on {bootstrap}, data in {data_dir / 'broker'}")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
        console.print(f"created topic [cyan]{topic}[/] with {partitions} partitions")

        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "zstd",
                             "enable.idempotence": True, "partitioner": "murmur2_random"})
        acked: list[tuple[int, int]] = []
        t0 = time.perf_counter()
        for i in range(records):
            producer.produce(topic, key=f"order-{i % 500}".encode(), value=f'{{"id": {i}, "amount": {i * 7 % 1000}}}'.encode(),
                             on_delivery=lambda err, msg: err is None and acked.append((msg.partition(), msg.offset())))
            if i % 1000 == 0:
                producer.poll(0)
        producer.flush(30)
        produce_s = time.perf_counter() - t0

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got, per_partition = 0, {p: 0 for p in range(partitions)}
        t0 = time.perf_counter()
        deadline = time.monotonic() + 60
        while got < records and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=1.0):
                if m.error() is None:
                    got += 1
                    per_partition[m.partition()] += 1
        consume_s = time.perf_counter() - t0
        marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
        consumer.close()
        del producer, admin  # release librdkafka handles before the broker stops (no reconnect noise)

    table = RichTable(title=f"topic {topic}")
    for col in ("partition", "records consumed", "log start", "high watermark"):
        table.add_column(col, justify="right")
    for p in range(partitions):
        table.add_row(str(p), str(per_partition[p]), str(marks[p][0]), str(marks[p][1]))
    console.print(table)
    console.print(f"produced {len(acked)}/{records} acknowledged records in {produce_s:.2f}s "
                  f"({records / produce_s:,.0f} msg/s); consumed {got} in {consume_s:.2f}s")
    if got != records or len(acked) != records:
        raise SystemExit(f"demo failed: produced {len(acked)}, consumed {got}, expected {records}")
    return {"produced": len(acked), "consumed": got}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", type=Path, default=None, help="where to keep the demo's data (default: a new temp dir)")
    ap.add_argument("--records", type=int, default=5000)
    args = ap.parse_args(argv)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="tidelake-demo-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    console.rule("[bold]tidelake demo")
    run_broker_demo(data_dir, args.records)
    console.print(f"[green]done[/] — data left in {data_dir}")


if __name__ == "__main__":
    main()
