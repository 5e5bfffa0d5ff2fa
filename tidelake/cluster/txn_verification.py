"""``TxnVerifier``: KIP-890 in a cluster. A partition leader that receives a transactional batch
starting a transaction in its partition asks the transactional id's coordinator (the leader of its
``__transaction_state`` partition, often another broker) whether the partition is in the producer's
open transaction: Kafka's inter-broker AddPartitionsToTxn v4 with ``verify_only`` (its
``AddPartitionsToTxnManager``); for a v2 producer (part 2) it asks the coordinator to add the partition
instead: AddPartitionsToTxn v5 without ``verify_only``. Errors that mean "the coordinator is moving" come back as
NOT_ENOUGH_REPLICAS, which every producer retries, as Kafka converts them."""
from __future__ import annotations

import logging
from typing import Callable

from kafka.protocol.producer import AddPartitionsToTxnRequest

from tidelake import errors
from tidelake.cluster.channel import BrokerChannel, ChannelError
from tidelake.cluster.metadata_cache import MetadataCache

log = logging.getLogger("tidelake.cluster.txn_verification")

VERIFY_VERSION = 4
ADD_VERSION = 5  # KIP-890 part 2: the coordinator adds for a v2 producer
REQUEST_TIMEOUT_S = 10.0
COORDINATOR_ANSWER_TIMEOUT_MS = int(REQUEST_TIMEOUT_S * 1000)  # the same bound when this broker is the coordinator
# the coordinator is moving or unreachable: the producer retries (Kafka answers these as NOT_ENOUGH_REPLICAS)
COORDINATOR_MOVING = {errors.NotCoordinator.code, errors.CoordinatorNotAvailable.code,
                      errors.CoordinatorLoadInProgress.code, errors.RequestTimedOut.code}


class TxnVerifier:
    def __init__(self, broker_id: int, cache: MetadataCache, listener: Callable[[], str]):
        self.broker_id = broker_id
        self.cache = cache
        self.listener = listener
        self._channels: dict[int, BrokerChannel] = {}

    async def verify(self, state_topic: str, state_partition: int, transactional_id: str, producer_id: int,
                     producer_epoch: int, topic: str, partition: int, add: bool = False) -> None:
        """Raises InvalidTxnState (not in the open transaction), InvalidProducerEpoch (fenced),
        NotEnoughReplicas (coordinator unavailable: retry) or ConcurrentTransactions (``add``: the previous
        transaction is completing); returns if the partition is verified (``add``: added)."""
        pm = self.cache.partition(state_topic, state_partition)
        ep = self.cache.endpoint(pm.leader, self.listener()) if pm is not None and pm.leader >= 0 else None
        if ep is None:
            raise errors.NotEnoughReplicas(f"no coordinator for {transactional_id} to verify the transaction")
        ch = self._channels.get(pm.leader)
        if ch is None or (ch.host, ch.port) != (ep.host, ep.port):
            if ch is not None:
                ch.close()
            ch = self._channels[pm.leader] = BrokerChannel(pm.leader, ep.host, ep.port,
                                                           client_id=f"broker-{self.broker_id}-txn-verify",
                                                           timeout_s=REQUEST_TIMEOUT_S)
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        request = AddPartitionsToTxnRequest(transactions=[T(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=not add, topics=[T.AddPartitionsToTxnTopic(name=topic, partitions=[partition])])])
        try:
            response = await ch.request(request, ADD_VERSION if add else VERIFY_VERSION)
        except ChannelError as e:
            raise errors.NotEnoughReplicas(f"transaction coordinator unreachable: {e}") from None
        code = response.error_code
        for result in response.results_by_transaction or ():
            for t in result.topic_results:
                for p in t.results_by_partition:
                    code = code or p.partition_error_code
        if code == errors.NONE:
            return
        if code in COORDINATOR_MOVING:
            raise errors.NotEnoughReplicas(f"transaction coordinator of {transactional_id} is moving (error {code})")
        if code in (errors.ProducerFenced.code, errors.InvalidProducerEpoch.code):
            raise errors.InvalidProducerEpoch(f"{transactional_id}: producer epoch {producer_epoch} is fenced")
        if code == errors.ConcurrentTransactions.code:
            raise errors.ConcurrentTransactions(f"{transactional_id}: the previous transaction is completing")
        if code == errors.InvalidTxnState.code:
            raise errors.InvalidTxnState(f"{transactional_id}: {topic}-{partition} is not in an open transaction "
                                         f"of producer {producer_id} epoch {producer_epoch}")
        raise errors.KafkaApiError(f"verification of {transactional_id} failed", code=code)

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
