"""Transactions v2 (KIP-890 part 2) against v1 on tidelake's broker, one producer speaking each in raw requests.

No client installed here speaks transaction protocol v2 (see README), so both sides are driven by the same
raw-request producer (tests/txn_v2_producer.py) and differ only in the protocol, as a Kafka 3.x and a 4.x
Java producer would:
  v1  InitProducerId v4; per transaction AddPartitionsToTxn v3 for the partitions it writes, Produce v9,
      EndTxn v3 (same epoch, sequences go on)
  v2  InitProducerId v5; Produce v12 with no AddPartitionsToTxn (the leader adds the partition), EndTxn v5
      (the epoch bumps on every commit, sequences restart at 0)
Each transaction writes one batch of --batch records to each of the topic's 3 partitions and commits; the
broker runs as its own process (``tidelake broker start``). Printed: transactions/s and records/s of each,
side by side, and v2 / v1. The client is a single synchronous Python loop: the figure is the broker's cost
per transaction seen through the same client, not a client's throughput.

    .venv/bin/python benchmarks/txn_versions.py [--transactions 2000] [--batch 10] [--size 100] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from kafka.protocol.producer import (AddPartitionsToTxnRequest, EndTxnRequest,  # noqa: E402
                                     InitProducerIdRequest, ProduceRequest)

from conftest import free_port, wait_port  # noqa: E402
from tidelake.protocol.records import Record, build_batch  # noqa: E402
from tidelake.protocol.wire_client import WireClient  # noqa: E402
from txn_throughput import PARTITIONS, create_topic, start_tidelake, stop  # noqa: E402
from txn_v2_producer import RawTxnProducerV2  # noqa: E402


@dataclass
class RawTxnProducerV1:
    """The v1 protocol's transactional producer (Kafka 3.x's), in the same raw requests as the v2 one."""
    client: WireClient
    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)
    added: set[tuple[str, int]] = field(default_factory=set)

    def init(self) -> None:
        r = self.client.request(InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=30_000, producer_id=-1,
            producer_epoch=-1), 4)
        assert r.error_code == 0, f"InitProducerId: error {r.error_code}"
        self.producer_id, self.producer_epoch = r.producer_id, r.producer_epoch

    def add_partitions(self, topic: str, partitions: list[int]) -> None:
        A = AddPartitionsToTxnRequest
        r = self.client.request(A(v3_and_below_transactional_id=self.transactional_id,
                                  v3_and_below_producer_id=self.producer_id,
                                  v3_and_below_producer_epoch=self.producer_epoch,
                                  v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=partitions)]), 3)
        codes = {p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}
        assert codes == {0}, f"AddPartitionsToTxn: errors {codes}"
        self.added.update((topic, p) for p in partitions)

    def produce(self, topic: str, partition: int, values: list[str]) -> int:
        seq = self.sequences.get((topic, partition), 0)
        now = int(time.time() * 1000)
        batch = build_batch([Record(i, now, None, v.encode(), []) for i, v in enumerate(values)],
                            producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=seq,
                            transactional=True)
        PR = ProduceRequest
        r = self.client.request(PR(transactional_id=self.transactional_id, acks=-1, timeout_ms=10_000, topic_data=[
            PR.TopicProduceData(name=topic, partition_data=[PR.TopicProduceData.PartitionProduceData(
                index=partition, records=batch)])]), 9)
        code = r.responses[0].partition_responses[0].error_code
        if code == 0:
            self.sequences[(topic, partition)] = seq + len(values)
        return code

    def end(self, commit: bool) -> int:
        r = self.client.request(EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                              producer_epoch=self.producer_epoch, committed=commit), 3)
        self.added.clear()
        return r.error_code


def run(version: int, bootstrap: str, topic: str, transactions: int, batch: int, size: int) -> float:
    """Seconds for ``transactions`` committed transactions of ``batch`` records to each partition."""
    values = ["x" * size] * batch
    with WireClient.connect(bootstrap, timeout=30) as client:
        producer = (RawTxnProducerV1(client, f"bench-v1-{topic}") if version == 1
                    else RawTxnProducerV2(client, f"bench-v2-{topic}"))
        producer.init()
        t0 = time.perf_counter()
        for _ in range(transactions):
            if version == 1:
                producer.add_partitions(topic, list(range(PARTITIONS)))
            for p in range(PARTITIONS):
                code = producer.produce(topic, p, values)
                assert code == 0, f"v{version} Produce to {topic}-{p}: error {code}"
            code = producer.end(True)
            assert code == 0, f"v{version} EndTxn: error {code}"
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transactions", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=10, help="records per partition per transaction")
    ap.add_argument("--size", type=int, default=100, help="record value bytes")
    ap.add_argument("--rounds", type=int, default=3, help="v1 and v2 alternately, each this many times (medians)")
    args = ap.parse_args()

    port = free_port()
    proc = start_tidelake(tempfile.mkdtemp(prefix="txnversions-"), port)
    bootstrap = f"127.0.0.1:{port}"
    seconds: dict[int, list[float]] = {1: [], 2: []}
    try:
        wait_port(port, 60)
        create_topic(bootstrap, "warmup")
        run(1, bootstrap, "warmup", 50, args.batch, args.size)
        run(2, bootstrap, "warmup", 50, args.batch, args.size)
        for r in range(args.rounds):
            for version in ((1, 2) if r % 2 == 0 else (2, 1)):
                topic = f"v{version}-{r}"
                create_topic(bootstrap, topic)
                seconds[version].append(run(version, bootstrap, topic, args.transactions, args.batch, args.size))
    finally:
        stop(proc)

    records = args.transactions * args.batch * PARTITIONS
    tps = {v: args.transactions / statistics.median(s) for v, s in seconds.items()}
    print(f"Command: `.venv/bin/python benchmarks/txn_versions.py --transactions {args.transactions} --batch "
          f"{args.batch} --size {args.size} --rounds {args.rounds}` (one tidelake broker process, a raw-request "
          f"producer on one connection; {PARTITIONS} partitions, {args.batch} records of {args.size} B per partition "
          f"per transaction; medians of {args.rounds} rounds, alternated; load average "
          f"{os.getloadavg()[0]:.1f})\n")
    print("| protocol | transactions/s | records/s | seconds (rounds) |")
    print("|---|---:|---:|---|")
    for v, label in ((1, "v1 (AddPartitionsToTxn v3, Produce v9, EndTxn v3)"),
                     (2, "v2 (Produce v12 adds the partitions, EndTxn v5 bumps the epoch)")):
        print(f"| {label} | {tps[v]:,.0f} | {tps[v] * records / args.transactions:,.0f} | "
              f"{', '.join(f'{s:.2f}' for s in seconds[v])} |")
    print(f"| **v2 / v1** | **{tps[2] / tps[1]:.2f}x** | | |")


if __name__ == "__main__":
    main()
