"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
DescribeTransactions, ListTransactions — and the wiring of the transaction coordinator.

InitProducerId is served by ``api_core``, which delegates to ``broker.txn_coordinator.init_producer_id``
when a transactional id is set. FindCoordinator (key type 1) is served by ``api_groups``.

The coordinator (``tidelake.coordinator.transactions``) is a pure state machine; this module gives it
its two outputs: ``__transaction_state`` appends (internal, compacted, 50 partitions, created on first
use) and COMMIT/ABORT markers through ``broker.append_marker`` (which wakes read_committed fetchers
as the LSO moves). A marker on a ``__consumer_offsets`` partition also materializes the offsets that
TxnOffsetCommit left pending there (or drops them on abort).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka.protocol.admin import (
    DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    EndTxnRequest, EndTxnResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
)

from tidelake import errors
from tidelake.broker.registry import api
from tidelake.coordinator.transactions import OFFSETS_TOPIC, TransactionCoordinator
from tidelake.coordinator.txn_log import TRANSACTION_STATE_TOPIC
from tidelake.coordinator.txn_offsets import PendingTxnOffsets
from tidelake.protocol.records import Record, build_batch

log = logging.getLogger(__name__)

OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = errors.ProducerFenced.code
INVALID_PRODUCER_EPOCH = errors.InvalidProducerEpoch.code
STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}  # Kafka's defaults
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600"}


def _now_ms() -> int:
    from tidelake.broker.server import wall_clock_ms
    return wall_clock_ms()


# ---------------------------------------------------------------------------------------------
# Wiring
# ---------------------------------------------------------------------------------------------
class BrokerTransactions:
    """The coordinator's outputs bound to a broker, plus the pending transactional offsets."""

    def __init__(self, broker: Any):
        self.broker = broker
        cfg = broker.config
        self.pending_offsets = PendingTxnOffsets()
        self.state_partitions = cfg.get_int("transaction.state.log.num.partitions", 50)
        self.offsets_partitions = cfg.get_int("offsets.topic.num.partitions", 50)
        self.check_interval_s = max(0.01, cfg.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000) / 1000)
        self.coordinator = TransactionCoordinator(
            write_state=self.write_state, write_markers=self.write_markers,
            allocate_producer_id=broker.allocate_producer_id, clock_ms=_now_ms,
            max_timeout_ms=cfg.get_int("transaction.max.timeout.ms", 900000),
            num_partitions=self.state_partitions, offsets_partitions=self.offsets_partitions,
            id_expiration_ms=cfg.get_int("transactional.id.expiration.ms", 604800000))
        self._task: asyncio.Task | None = None

    # -- internal topics ----------------------------------------------------------------------
    def ensure_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        if self.broker.topic(name) is None:
            try:
                self.broker.create_topic(name, partitions, configs, internal=True)
            except errors.TopicAlreadyExists:
                pass

    def write_state(self, partition: int, key: bytes, value: bytes | None) -> None:
        self.ensure_topic(TRANSACTION_STATE_TOPIC, self.state_partitions, STATE_TOPIC_CONFIGS)
        batch = build_batch([Record(0, _now_ms(), key, value)])
        self.broker.append(TRANSACTION_STATE_TOPIC, partition, batch)

    def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      partitions: list[tuple[str, int]]) -> None:
        for topic, partition in partitions:
            try:
                self.broker.append_marker(topic, partition, producer_id=producer_id, producer_epoch=producer_epoch,
                                          commit=commit, coordinator_epoch=coordinator_epoch)
            except errors.UnknownTopicOrPartition:
                log.warning("%s-%d no longer exists: no %s marker for producer %d", topic, partition,
                            "COMMIT" if commit else "ABORT", producer_id)
            if topic == OFFSETS_TOPIC:
                self.apply_offsets(self.pending_offsets.complete(producer_id, partition, commit))

    def apply_offsets(self, records: list[tuple[str, bytes, bytes | None]]) -> None:
        """Make committed transactional offsets visible in the group coordinator's offset store."""
        if not records:
            return
        store = group_offset_store(self.broker)
        if store is None:
            log.error("no group coordinator offset store: %d committed transactional offsets not applied",
                      len(records))
            return
        for _group, key, value in records:
            store.apply_record(key, value)

    # -- lifecycle ----------------------------------------------------------------------------
    def load(self) -> None:
        """Replay ``__transaction_state``, rebuild pending transactional offsets, finish Prepare*."""
        if self.broker.topic(TRANSACTION_STATE_TOPIC) is not None:
            from tidelake.protocol.records import decode_records
            n = 0
            for p in range(self.state_partitions):
                plog = self.broker.get_log(TRANSACTION_STATE_TOPIC, p)
                if plog is None:
                    continue
                records = []
                for header, data in plog.iter_batches(0):
                    if header.is_control:
                        continue
                    records.extend((r.key, r.value) for r in decode_records(data, 0, header))
                n += self.coordinator.load(records)
            log.info("loaded %d transaction state records: %d transactional ids", n,
                     len(self.coordinator.transactions))
        self._load_pending_offsets()
        done = self.coordinator.complete_prepared()
        if done:
            log.info("completed transactions left in Prepare* at restart: %s", done)

    def _load_pending_offsets(self) -> None:
        """Transactional offset commits whose transaction was still open when the broker stopped."""
        if self.broker.topic(OFFSETS_TOPIC) is None:
            return
        from tidelake.coordinator.offsets import OffsetKey, decode_key
        from tidelake.coordinator.txn_offsets import resolve_transactional_records
        for p in range(self.offsets_partitions):
            plog = self.broker.get_log(OFFSETS_TOPIC, p)
            first = plog.producer_state.first_unstable_offset() if plog is not None else None
            if first is None:
                continue
            _, open_txns = resolve_transactional_records(plog.iter_batches(first))
            for pid, recs in open_txns.items():
                for key, value in recs:
                    k = decode_key(key)
                    group = k.group if isinstance(k, OffsetKey) else ""
                    self.pending_offsets.add(pid, p, group, [(key, value)])

    async def run_periodic(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_s)
            try:
                self.coordinator.tick()
            except Exception:  # keep checking; a failed marker write is retried next round
                log.exception("transaction timeout check failed")


def group_offset_store(broker: Any):
    """The group coordinator's OffsetStore (``apply_record(key, value)``), if the groups module is loaded."""
    gc = broker.group_coordinator
    if gc is None:
        return None
    for attr in ("offsets", "offset_store", "store"):
        store = getattr(gc, attr, None)
        if store is not None and hasattr(store, "apply_record"):
            return store
    return None


async def on_start(broker: Any) -> None:
    txns = BrokerTransactions(broker)
    txns.load()
    broker.txn_coordinator = txns.coordinator
    broker.transactions = txns
    txns._task = asyncio.get_running_loop().create_task(txns.run_periodic())


async def on_stop(broker: Any) -> None:
    txns: BrokerTransactions | None = getattr(broker, "transactions", None)
    if txns is not None and txns._task is not None:
        txns._task.cancel()
        try:
            await txns._task
        except (asyncio.CancelledError, Exception):
            pass
    broker.txn_coordinator = None


def _txns(broker: Any) -> BrokerTransactions:
    txns = getattr(broker, "transactions", None)
    if txns is None or broker.txn_coordinator is None:
        raise errors.CoordinatorNotAvailable("transaction coordinator not loaded")
    return txns


def _client_code(code: int, version: int, first_version_knowing_fenced: int = 2) -> int:
    """Clients older than the version that introduced PRODUCER_FENCED get INVALID_PRODUCER_EPOCH (Kafka does the same)."""
    if code == PRODUCER_FENCED and version < first_version_knowing_fenced:
        return INVALID_PRODUCER_EPOCH
    return code


# ---------------------------------------------------------------------------------------------
# AddPartitionsToTxn (v0-3 client form, v4+ batched / verify-only form)
# ---------------------------------------------------------------------------------------------
def _add_partitions_results(broker: Any, txn_id: str, producer_id: int, producer_epoch: int, topics,
                            verify_only: bool, version: int) -> list:
    R = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    P = R.AddPartitionsToTxnPartitionResult
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    codes: dict[tuple[str, int], int]
    unknown = {tp for tp in wanted if broker.get_log(*tp) is None}
    if unknown:  # Kafka: the unknown ones fail, the rest are not attempted
        codes = {tp: errors.UnknownTopicOrPartition.code if tp in unknown else OPERATION_NOT_ATTEMPTED
                 for tp in wanted}
    else:
        try:
            coord = _txns(broker).coordinator
            if verify_only:
                codes = coord.verify_partitions(txn_id, producer_id, producer_epoch, wanted)
            else:
                coord.add_partitions(txn_id, producer_id, producer_epoch, wanted)
                codes = {tp: 0 for tp in wanted}
        except errors.KafkaApiError as e:
            codes = {tp: _client_code(e.code, version) for tp in wanted}
    by_topic: dict[str, list] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(P(partition_index=p, partition_error_code=code))
    return [R(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


@api(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5)
async def add_partitions_to_txn(broker, ctx, req):
    v = ctx.api_version
    if v <= 3:
        results = _add_partitions_results(broker, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                          req.v3_and_below_producer_epoch, req.v3_and_below_topics, False, v)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)
    out = [AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
        transactional_id=t.transactional_id,
        topic_results=_add_partitions_results(broker, t.transactional_id, t.producer_id, t.producer_epoch,
                                              t.topics, t.verify_only, v))
        for t in req.transactions]
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=out)


# ---------------------------------------------------------------------------------------------
# AddOffsetsToTxn / TxnOffsetCommit
# ---------------------------------------------------------------------------------------------
@api(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4)
async def add_offsets_to_txn(broker, ctx, req):
    try:
        txns = _txns(broker)
        txns.ensure_topic(OFFSETS_TOPIC, txns.offsets_partitions, OFFSETS_TOPIC_CONFIGS)
        txns.coordinator.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
        code = 0
    except errors.KafkaApiError as e:
        code = _client_code(e.code, ctx.api_version)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)


def _check_group_member(broker: Any, req, version: int) -> None:
    """KIP-447: a TxnOffsetCommit carrying the consumer's group metadata (v3+) is fenced like an
    OffsetCommit of that member; without it (generation -1, no member id) it is accepted."""
    if version < 3 or (req.generation_id < 0 and not req.member_id):
        return
    gc = broker.group_coordinator
    group = getattr(gc, "groups", {}).get(req.group_id) if gc is not None else None
    if group is None:
        return
    from tidelake.coordinator.consumer_group import ConsumerGroup
    if isinstance(group, ConsumerGroup):  # KIP-848 group: the generation is the member epoch
        code = group.validate_offset_commit(req.member_id, req.generation_id)
    else:
        code = group.validate_offset_commit(req.member_id, req.group_instance_id, req.generation_id)
    if code:
        raise errors.KafkaApiError(f"TxnOffsetCommit from {req.member_id!r} gen {req.generation_id}", code=code)


@api(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5)
async def txn_offset_commit(broker, ctx, req):
    from tidelake.coordinator.offsets import OffsetAndMetadata, offset_records
    T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    now = _now_ms()
    try:
        txns = _txns(broker)
        # The group's partition must be in this producer's open transaction (AddOffsetsToTxn first).
        txns.coordinator.check_txn_offset_commit(req.transactional_id, req.producer_id, req.producer_epoch,
                                                 req.group_id)
        _check_group_member(broker, req, ctx.api_version)
        _, partition = txns.coordinator.offsets_partition_for(req.group_id)
        commits = [(t.name, p.partition_index,
                    OffsetAndMetadata(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                      p.committed_metadata or "", now))
                   for t in req.topics for p in t.partitions]
        records = list(offset_records(req.group_id, commits))
        if records:
            batch = build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)],
                                producer_id=req.producer_id, producer_epoch=req.producer_epoch, transactional=True)
            broker.append(OFFSETS_TOPIC, partition, batch)
            txns.pending_offsets.add(req.producer_id, partition, req.group_id, records)
        code = 0
    except errors.KafkaApiError as e:
        code = _client_code(e.code, ctx.api_version)
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])


# ---------------------------------------------------------------------------------------------
# EndTxn
# ---------------------------------------------------------------------------------------------
# v5 is transaction protocol v2 (KIP-890 part 2: epoch bump on every EndTxn), which this coordinator
# does not implement; clients negotiate v4 and the v1 protocol.
@api(EndTxnRequest, EndTxnResponse, 0, 4)
async def end_txn(broker, ctx, req):
    try:
        _txns(broker).coordinator.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
        code = 0
    except errors.KafkaApiError as e:
        code = _client_code(e.code, ctx.api_version)
    return EndTxnResponse(throttle_time_ms=0, error_code=code)


# ---------------------------------------------------------------------------------------------
# DescribeTransactions / ListTransactions
# ---------------------------------------------------------------------------------------------
@api(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0)
async def describe_transactions(broker, ctx, req):
    S = DescribeTransactionsResponse.TransactionState
    out = []
    for txn_id in req.transactional_ids:
        try:
            m = _txns(broker).coordinator.describe(txn_id)
        except errors.KafkaApiError as e:
            out.append(S(error_code=e.code, transactional_id=txn_id, transaction_state="",
                         transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                         producer_epoch=-1, topics=[]))
            continue
        out.append(S(error_code=0, transactional_id=txn_id, transaction_state=m.state.kafka_name,
                     transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.start_ms,
                     producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                     topics=[S.TopicData(topic=t, partitions=ps) for t, ps in m.topics().items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)


@api(ListTransactionsRequest, ListTransactionsResponse, 0, 2)
async def list_transactions(broker, ctx, req):
    S = ListTransactionsResponse.TransactionState
    v = ctx.api_version
    try:
        txns, unknown = _txns(broker).coordinator.list_transactions(
            req.state_filters or [], req.producer_id_filters or [],
            req.duration_filter if v >= 1 else -1,
            req.transactional_id_pattern if v >= 2 else None)
    except errors.CoordinatorNotAvailable as e:
        return ListTransactionsResponse(throttle_time_ms=0, error_code=e.code, unknown_state_filters=[],
                                        transaction_states=[])
    except Exception as e:  # a bad regular expression in transactional_id_pattern
        if isinstance(e, errors.KafkaApiError):
            raise
        return ListTransactionsResponse(throttle_time_ms=0, error_code=errors.InvalidRequest.code,
                                        unknown_state_filters=[], transaction_states=[])
    return ListTransactionsResponse(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                    transaction_states=[S(transactional_id=m.transactional_id,
                                                          producer_id=m.producer_id,
                                                          transaction_state=m.state.kafka_name) for m in txns])
