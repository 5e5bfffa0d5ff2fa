"""A transactional producer of transaction protocol v2 (KIP-890 part 2) in raw requests, as Kafka 4.x's
Java producer speaks it: InitProducerId v5, Produce v12 with no AddPartitionsToTxn (the partition leader
adds the partition), TxnOffsetCommit v5 with no AddOffsetsToTxn, EndTxn v5 whose response carries the
bumped epoch the next transaction uses, with sequences starting again at 0. None of the clients
installed here speaks v2 (librdkafka, kafka-clients 3.9, KafkaJS, @platformatic/kafka, kafka-python
stop at EndTxn v4), so the tests drive the broker with this."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from kafka.protocol.producer import (EndTxnRequest, InitProducerIdRequest, ProduceRequest,
                                     TxnOffsetCommitRequest)

from tidelake.protocol.records import Record, build_batch
from tidelake.protocol.wire_client import WireClient

INIT_PRODUCER_ID_VERSION = 5
PRODUCE_VERSION = 12
TXN_OFFSET_COMMIT_VERSION = 5
END_TXN_VERSION = 5
CONCURRENT_TRANSACTIONS = 51  # the previous transaction's markers are being written: retried, as Kafka's producer does
RETRIES = 200
RETRY_BACKOFF_S = 0.05


@dataclass
class RawTxnProducerV2:
    client: WireClient
    transactional_id: str
    timeout_ms: int = 30_000
    producer_id: int = -1
    producer_epoch: int = -1
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)

    def init(self) -> None:
        r = self.client.request(InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch), INIT_PRODUCER_ID_VERSION)
        assert r.error_code == 0, f"InitProducerId: error {r.error_code}"
        self.producer_id, self.producer_epoch = r.producer_id, r.producer_epoch
        self.sequences.clear()

    def produce(self, topic: str, partition: int, values: list[str], via: WireClient | None = None) -> int:
        """One transactional batch (sent ``via`` the partition's leader in a cluster); the partition's error code."""
        return _retried(lambda: self._produce(topic, partition, values, via))

    def _produce(self, topic: str, partition: int, values: list[str], via: WireClient | None) -> int:
        seq = self.sequences.get((topic, partition), 0)
        now = int(time.time() * 1000)
        records = [Record(i, now, None, v.encode(), []) for i, v in enumerate(values)]
        batch = build_batch(records, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                            base_sequence=seq, transactional=True)
        PR = ProduceRequest
        r = (via or self.client).request(PR(transactional_id=self.transactional_id, acks=-1, timeout_ms=10_000, topic_data=[
            PR.TopicProduceData(name=topic, partition_data=[PR.TopicProduceData.PartitionProduceData(
                index=partition, records=batch)])]), PRODUCE_VERSION)
        code = r.responses[0].partition_responses[0].error_code
        if code == 0:
            self.sequences[(topic, partition)] = seq + len(values)
        return code

    def commit_offset(self, group_id: str, topic: str, partition: int, offset: int,
                      via: WireClient | None = None) -> int:
        """TxnOffsetCommit v5 (sent ``via`` the group's coordinator in a cluster); the partition's error code."""
        return _retried(lambda: self._commit_offset(group_id, topic, partition, offset, via))

    def _commit_offset(self, group_id: str, topic: str, partition: int, offset: int, via: WireClient | None) -> int:
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        r = (via or self.client).request(TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, generation_id=-1, member_id="", group_instance_id=None,
            topics=[T(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata="")])]), TXN_OFFSET_COMMIT_VERSION)
        return r.topics[0].partitions[0].error_code

    def end(self, commit: bool) -> int:
        """EndTxn v5; on success the producer goes on with the id and epoch it returns."""
        r = self.client.request(EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                              producer_epoch=self.producer_epoch, committed=commit), END_TXN_VERSION)
        if r.error_code == 0:
            self.producer_id, self.producer_epoch = r.producer_id, r.producer_epoch
            self.sequences.clear()  # every epoch starts its sequences at 0
        return r.error_code


def _retried(send) -> int:
    for _ in range(RETRIES):
        code = send()
        if code != CONCURRENT_TRANSACTIONS:
            return code
        time.sleep(RETRY_BACKOFF_S)
    return code
