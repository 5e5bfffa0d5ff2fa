"""CPU time the broker spends per request on its hot paths, without sockets or clients.

    .venv/bin/python benchmarks/broker_request_cpu.py [--profile]

Feeds ready-made Produce (10 x 100 B records, acks=1) and Fetch (16 KB) request frames to
``Broker.handle_frame`` and reports process CPU time per request (CPU time, not wall time, so other
load on a shared machine affects it less). This is the broker's share of every request; the
end-to-end comparison with Tansu is benchmarks/broker_throughput.py.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time

from kafka.protocol.consumer import FetchRequest as FR
from kafka.protocol.producer import ProduceRequest as PR

from tidelake.broker.server import Broker
from tidelake.protocol.framing import encode_request_frame
from tidelake.protocol.records import Record, build_batch
from tidelake.security.session import Session


async def main(profile: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        broker = Broker(d, port=0)
        await broker.start()
        try:
            broker.create_topic("bench", 1)
            batch = build_batch([Record(i, 1, None, b"x" * 100) for i in range(10)])
            produce = PR(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[PR.TopicProduceData(
                name="bench", partition_data=[PR.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
            fetch = FR(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[FR.FetchTopic(topic="bench", partitions=[
                           FR.FetchTopic.FetchPartition(partition=0, fetch_offset=1000, partition_max_bytes=16384,
                                                        current_leader_epoch=-1, log_start_offset=-1)])],
                       forgotten_topics_data=[], rack_id="")
            cases = [("produce v9, 10 x 100 B", encode_request_frame(0, 9, 1, bytes(produce.encode(version=9)),
                                                                    "bench", flexible_header=True)[4:], 20_000),
                     ("fetch v11, 16 KB", encode_request_frame(1, 11, 1, bytes(fetch.encode(version=11)),
                                                              "bench")[4:], 5_000)]
            session = Session.plaintext("127.0.0.1")  # an anonymous PLAINTEXT connection
            for label, frame, n in cases:
                prof = cProfile.Profile() if profile else None
                t0 = time.process_time()
                if prof:
                    prof.enable()
                for _ in range(n):
                    await broker.handle_frame(frame, session)
                if prof:
                    prof.disable()
                dt = time.process_time() - t0
                print(f"{label:24} {dt / n * 1e6:8.1f} us CPU per request ({n / dt:,.0f} requests per CPU-second)")
                if prof:
                    pstats.Stats(prof).sort_stats("tottime").print_stats(12)
        finally:
            await broker.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", action="store_true")
    asyncio.run(main(ap.parse_args().profile))
