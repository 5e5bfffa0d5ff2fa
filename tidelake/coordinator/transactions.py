"""The transaction coordinator: Kafka's transaction state machine, without network or disk.

One ``TransactionMetadata`` per ``transactional.id``. Every state change is first written as a
TransactionLogKey/Value record to the ``__transaction_state`` partition of the id (``write_state``
callback; the broker appends it to the compacted internal topic) and only then applied in memory,
so a restart that replays the topic (``load``) sees exactly the acknowledged states.

States and transitions (Kafka's; the same for transaction protocol v1, the one Java 3.x and librdkafka
speak, and v2):

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
                                             \\--EndTxn(abort) / timeout / fencing--> PrepareAbort --markers--> CompleteAbort
    Empty/Complete* --InitProducerId--> Empty (epoch + 1)

COMMIT/ABORT control markers are written to every partition of the transaction (including the
``__consumer_offsets`` partition of a group added by AddOffsetsToTxn). On a single node they are
written synchronously through ``write_markers`` before EndTxn answers. In a cluster the partitions
are led by other brokers: once the Prepare* record is on the in-sync replicas (``state_replicated``;
Kafka's order, so no marker carries out a decision a next coordinator would not load) ``send_markers``
hands them to a sender (WriteTxnMarkers to each leader) and calls back when all are written; EndTxn
answers once Prepare* is replicated, the transaction stays
in Prepare* meanwhile (a new AddPartitions gets CONCURRENT_TRANSACTIONS, as in Kafka) and becomes
Complete* in the callback. A failure leaves the transaction in Prepare* and ``complete_prepared()``
(called by the periodic check and after a reload) finishes it — the same recovery as after a crash.

In a cluster a coordinator owns only the ``__transaction_state`` partitions its broker leads:
``load_partition`` / ``unload_partition`` follow the leadership, and the partition's leader epoch
is the coordinator epoch its markers carry (partition leaders fence older coordinators with it).

Transactional offset commits (TxnOffsetCommit, KIP-98/447) go through the coordinator too: it
checks the group was added to the transaction, writes the records as a transactional batch to the
group's ``__consumer_offsets`` partition (``write_offsets``) and keeps them pending until that
partition's marker is written; on COMMIT it hands them to the group coordinator (``apply_offsets``),
on ABORT it drops them. ``has_pending_offsets`` is what OffsetFetch(require_stable) asks. These two
callbacks are the whole interface between the transaction and the group coordinator.

Transaction protocol v2 (KIP-890 part 2, ``transaction.version`` 2): a producer that ends its
transaction with EndTxn v5 gets its epoch bumped by every commit and abort (Prepare* carries the new
epoch, the markers are written with it, so a zombie of the previous transaction holding the old epoch
is fenced by every partition it wrote to); at epoch 32766 the bump rotates to a new producer id
(``next_producer_id``, used from Complete* on, with epoch 0). A v2 producer adds partitions implicitly:
the partition leader (Produce v12+) and the group coordinator (TxnOffsetCommit v5+) call
``add_partitions`` / ``add_offsets`` on its behalf. Each transaction remembers the protocol version
its client used (``client_transaction_version``), which decides how a retried EndTxn is recognised.

The clock is injected (``clock_ms``); ``abort_timed_out()`` / ``expire_transactional_ids()`` are
driven by the broker's periodic task.
"""
from __future__ import annotations

import collections
import logging
import re
from typing import Callable, Iterable

from tidelake import errors
from tidelake.coordinator.offsets import OFFSETS_TOPIC
from tidelake.coordinator.txn_log import (
    TxnStatus, decode_key, decode_value, encode_key, encode_value, partition_for,
)
from tidelake.coordinator.txn_metadata import (MAX_PRODUCER_EPOCH, TRANSACTION_VERSION_0, TRANSACTION_VERSION_2,
                                               ProducerIdAndEpoch, TransactionMetadata)
from tidelake.coordinator.txn_offsets import PendingTxnOffsets
from tidelake.coordinator.txn_outputs import (MarkerSender, MarkerWriter, OffsetRecord, OffsetsApplier, OffsetsWriter,
                                              StateReplicated, StateWriter, TopicPartition)

log = logging.getLogger(__name__)


class TransactionCoordinator:
    """Kafka's transaction coordinator: of every ``__transaction_state`` partition on a single node, of the
    partitions loaded with ``load_partition`` in a cluster."""

    def __init__(self, *, write_state: StateWriter, write_markers: MarkerWriter,
                 allocate_producer_id: Callable[[], int], clock_ms: Callable[[], int],
                 max_timeout_ms: int = 900_000, num_partitions: int = 50, offsets_partitions: int = 50,
                 id_expiration_ms: int = 7 * 24 * 3600 * 1000, coordinator_epoch: int = 0,
                 write_offsets: OffsetsWriter | None = None, apply_offsets: OffsetsApplier | None = None,
                 send_markers: MarkerSender | None = None, state_replicated: StateReplicated | None = None):
        self._write_state = write_state
        self._write_markers = write_markers
        self._send_markers = send_markers  # a cluster's: markers on other brokers, completed later
        # a cluster's: markers go out only once the Prepare* record is on the ISR (so the next coordinator
        # loads the decision the markers carry out)
        self._state_replicated = state_replicated
        self._completing: set[str] = set()  # transactional ids whose markers are being sent
        # transactional id -> (producer id, epoch) that asked to add partitions to a new transaction while
        # the previous one was still completing (refused with CONCURRENT_TRANSACTIONS); see end_txn
        self._refused_next: dict[str, tuple[int, int]] = {}
        self.partition_epochs: dict[int, int] = {}  # in a cluster: owned partition -> coordinator epoch
        self._write_offsets = write_offsets  # TxnOffsetCommit needs both (a coordinator without
        self._apply_offsets = apply_offsets  # them serves everything else)
        self.pending_offsets = PendingTxnOffsets()
        self._allocate_producer_id = allocate_producer_id
        self.clock_ms = clock_ms
        self.max_timeout_ms = max_timeout_ms  # transaction.max.timeout.ms
        self.num_partitions = num_partitions  # transaction.state.log.num.partitions
        self.offsets_partitions = offsets_partitions  # offsets.topic.num.partitions
        self.id_expiration_ms = id_expiration_ms  # transactional.id.expiration.ms
        self.coordinator_epoch = coordinator_epoch
        self.transactions: dict[str, TransactionMetadata] = {}
        # since this coordinator started: begun, committed, aborted, timed_out (the broker's metrics read it)
        self.counts: collections.Counter[str] = collections.Counter()

    # ------------------------------------------------------------------------------------------
    # Persistence
    # ------------------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def offsets_partition_for(self, group_id: str) -> TopicPartition:
        return OFFSETS_TOPIC, partition_for(group_id, self.offsets_partitions)

    def coordinator_epoch_for(self, transactional_id: str) -> int:
        return self.partition_epochs.get(self.partition_for(transactional_id), self.coordinator_epoch)

    def load_partition(self, partition: int, coordinator_epoch: int,
                       records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """In a cluster: this coordinator now owns ``__transaction_state``-``partition`` (its broker
        became the leader in ``coordinator_epoch``): replay its records. Call ``complete_prepared()``
        afterwards. Returns the number of records applied."""
        self.unload_partition(partition)
        self.partition_epochs[partition] = coordinator_epoch
        return self.load((k, v) for k, v in records
                         if k is not None and self.partition_for(decode_key(k)) == partition)

    def unload_partition(self, partition: int) -> list[str]:
        """In a cluster: another broker coordinates ``partition`` now; forget its transactions (a
        marker send still running for one of them ends without writing Complete*)."""
        self.partition_epochs.pop(partition, None)
        gone = [t for t in self.transactions if self.partition_for(t) == partition]
        for t in gone:
            del self.transactions[t]
            self._completing.discard(t)
            self._refused_next.pop(t, None)
        return gone

    def _persist(self, new: TransactionMetadata) -> None:
        """Write the new state, then make it the in-memory state (write-ahead)."""
        self._write_state(self.partition_for(new.transactional_id), encode_key(new.transactional_id),
                          encode_value(new.to_log_value()))
        self.transactions[new.transactional_id] = new

    def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Replay ``__transaction_state`` records (key, value) in log order; the last value wins.

        Call ``complete_prepared()`` afterwards to finish transactions caught in Prepare*.
        Returns the number of records applied.
        """
        n = 0
        for key, value in records:
            if key is None:
                continue
            txn_id = decode_key(key)
            v = decode_value(value)
            n += 1
            if v is None:
                self.transactions.pop(txn_id, None)
                continue
            self.transactions[txn_id] = TransactionMetadata(
                txn_id, v.producer_id, v.producer_epoch, v.timeout_ms, v.status,
                {(t, p) for t, ps in v.partitions.items() for p in ps}, v.start_ms, v.last_update_ms,
                last_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
                client_transaction_version=v.client_transaction_version)
        return n

    # ------------------------------------------------------------------------------------------
    # InitProducerId
    # ------------------------------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                         producer_id: int = -1, producer_epoch: int = -1) -> ProducerIdAndEpoch:
        """Return (producer id, epoch) for a transactional producer; bumps the epoch (fencing older
        sessions) and aborts a transaction the previous session left open.

        ``producer_id``/``producer_epoch`` (InitProducerId v3+, KIP-360) are the caller's current
        ones, or -1; a stale pair means a zombie → ProducerFenced.
        """
        if not transactional_id:
            raise errors.InvalidRequest("transactional id must be non-empty")
        if transaction_timeout_ms <= 0 or transaction_timeout_ms > self.max_timeout_ms:
            raise errors.InvalidTransactionTimeout(
                f"transaction.timeout.ms {transaction_timeout_ms} not in (0, {self.max_timeout_ms}]")
        now = self.clock_ms()
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, self._allocate_producer_id(), -1,
                                       transaction_timeout_ms, TxnStatus.EMPTY, set(), -1, now)
            return self._init_bump(meta, transaction_timeout_ms, now)

        if producer_id >= 0:  # KIP-360: the client says which (id, epoch) it holds
            if (producer_id, producer_epoch) == (meta.last_producer_id, meta.last_producer_epoch) \
                    and meta.state == TxnStatus.EMPTY:
                # retry of the InitProducerId we answered
                return ProducerIdAndEpoch(meta.producer_id, meta.producer_epoch)
            if producer_id != meta.producer_id or producer_epoch != meta.producer_epoch:
                log.info("transactional id %s: fencing producer (%d, %d); the current one is (%d, %d)",
                         transactional_id, producer_id, producer_epoch, meta.producer_id, meta.producer_epoch)
                raise errors.ProducerFenced(
                    f"{transactional_id}: producer ({producer_id}, {producer_epoch}) is not the current "
                    f"({meta.producer_id}, {meta.producer_epoch})")

        if meta.state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
            # markers still to be written (an earlier write failed): finish now, else tell the client to retry
            self._complete(meta)
            meta = self.transactions[transactional_id]
            if meta.state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
                raise errors.ConcurrentTransactions(f"{transactional_id} is completing")
        if meta.state == TxnStatus.ONGOING:
            # A new session of the same transactional id: fence the old one (epoch + 1) and abort its
            # transaction with the fenced epoch; the markers make the old session's writes invisible.
            meta = self._fence_and_abort(meta, now)
        if meta.state == TxnStatus.DEAD:
            raise errors.ConcurrentTransactions(f"{transactional_id} is being expired")
        return self._init_bump(meta, transaction_timeout_ms, now)

    def _init_bump(self, meta: TransactionMetadata, timeout_ms: int, now: int) -> ProducerIdAndEpoch:
        new = TransactionMetadata(meta.transactional_id, meta.producer_id, meta.producer_epoch + 1, timeout_ms,
                                  TxnStatus.EMPTY, set(), -1, now)
        if meta.producer_epoch >= 0:  # remembered so a retried InitProducerId (KIP-360) is recognised
            new.last_producer_id, new.last_producer_epoch = meta.producer_id, meta.producer_epoch
        if meta.epoch_exhausted:
            new.producer_id, new.producer_epoch = self._allocate_producer_id(), 0
        self._persist(new)
        self._refused_next.pop(meta.transactional_id, None)
        log.info("InitProducerId %s -> producer id %d epoch %d", meta.transactional_id, new.producer_id,
                 new.producer_epoch)
        return ProducerIdAndEpoch(new.producer_id, new.producer_epoch)

    def _fence_and_abort(self, meta: TransactionMetadata, now: int) -> TransactionMetadata:
        """Bump the epoch (so the current holder is fenced) and abort the open transaction. A v2 transaction's
        epoch is bumped even at 32766 (its markers must carry an epoch past its records') and its producer id
        rotates then, as after a v2 EndTxn."""
        epoch, next_producer_id = meta.producer_epoch + 1, -1
        if meta.epoch_exhausted:
            if meta.transactions_v2:
                next_producer_id = self._allocate_producer_id()
            else:
                epoch = meta.producer_epoch
        prepared = TransactionMetadata(meta.transactional_id, meta.producer_id, epoch, meta.timeout_ms,
                                       TxnStatus.PREPARE_ABORT, set(meta.partitions), meta.start_ms, now,
                                       meta.last_producer_id, meta.last_producer_epoch,
                                       next_producer_id=next_producer_id,
                                       client_transaction_version=meta.client_transaction_version)
        self._persist(prepared)
        self._complete(prepared)
        done = self.transactions[meta.transactional_id]
        if done.state != TxnStatus.COMPLETE_ABORT:
            raise errors.ConcurrentTransactions(f"{meta.transactional_id}: abort of the fenced transaction pending")
        return done

    # ------------------------------------------------------------------------------------------
    # AddPartitionsToTxn / AddOffsetsToTxn
    # ------------------------------------------------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state == TxnStatus.DEAD:
            raise errors.InvalidProducerIdMapping(f"unknown transactional id {transactional_id!r}")
        if meta.producer_id != producer_id:
            raise errors.InvalidProducerIdMapping(
                f"{transactional_id}: producer id {producer_id} != {meta.producer_id}")
        if producer_epoch != meta.producer_epoch:
            log.info("transactional id %s: fencing producer %d at epoch %d; the current epoch is %d",
                     transactional_id, producer_id, producer_epoch, meta.producer_epoch)
            raise errors.ProducerFenced(
                f"{transactional_id}: epoch {producer_epoch} is not the current {meta.producer_epoch}")
        return meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition],
                       client_transaction_version: int = TRANSACTION_VERSION_0) -> None:
        """Add partitions to the producer's transaction (starting it if none is open).
        ``client_transaction_version`` 2: asked on a v2 producer's behalf (Produce v12+, TxnOffsetCommit v5+,
        AddPartitionsToTxn v5 between brokers)."""
        current = self.transactions.get(transactional_id)
        if current is not None and current.state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT) \
                and current.next_producer_id >= 0 and (producer_id, producer_epoch) == current.producer_after():
            # v2, past an epoch overflow: the producer already holds the new id its EndTxn returned, the
            # markers of the old one are still being written (not a mapping error: it retries)
            raise errors.ConcurrentTransactions(f"{transactional_id}: previous transaction still completing")
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        wanted = set(partitions)
        if meta.state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
            # the producer saw its EndTxn succeed and begins the next transaction: remembered for end_txn
            if self._refused_next.get(transactional_id) != (producer_id, producer_epoch):  # (usual: DEBUG)
                log.debug("transactional id %s: producer (%d, %d) begins a transaction while the previous one is "
                         "%s: CONCURRENT_TRANSACTIONS until its markers are written", transactional_id, producer_id,
                         producer_epoch, meta.state.kafka_name)
            self._refused_next[transactional_id] = (producer_id, producer_epoch)
            self._complete(meta)  # normally already complete; retry a failed marker write
            raise errors.ConcurrentTransactions(f"{transactional_id}: previous transaction still completing")
        if meta.state == TxnStatus.PREPARE_EPOCH_FENCE:
            raise errors.ConcurrentTransactions(f"{transactional_id}: being fenced")
        if meta.state == TxnStatus.ONGOING and wanted <= meta.partitions:
            return
        now = self.clock_ms()
        starting = meta.state != TxnStatus.ONGOING
        new = TransactionMetadata(transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms,
                                  TxnStatus.ONGOING, (set() if starting else set(meta.partitions)) | wanted,
                                  now if starting else meta.start_ms, now,
                                  meta.last_producer_id, meta.last_producer_epoch,
                                  client_transaction_version=client_transaction_version)
        self._persist(new)
        self._refused_next.pop(transactional_id, None)
        if starting:
            self.counts["begun"] += 1

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    group_id: str, client_transaction_version: int = TRANSACTION_VERSION_0) -> TopicPartition:
        """AddOffsetsToTxn (or, v2, TxnOffsetCommit v5+): the group's ``__consumer_offsets`` partition joins
        the transaction."""
        tp = self.offsets_partition_for(group_id)
        self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], client_transaction_version)
        return tp

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ ``verify_only``: error code per partition, 0 if it is in the open
        transaction of this producer (KIP-890 part 1), INVALID_TXN_STATE otherwise."""
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        ongoing = meta.state == TxnStatus.ONGOING
        codes = {tp: 0 if ongoing and tp in meta.partitions else errors.InvalidTxnState.code for tp in partitions}
        refused = sorted(tp for tp, code in codes.items() if code)
        if refused:
            log.info("transactional id %s: INVALID_TXN_STATE for verifying %s: producer (%d, %d) is in state %s "
                     "with partitions %s", transactional_id, ", ".join(f"{t}-{p}" for t, p in refused), producer_id,
                     producer_epoch, meta.state.kafka_name, sorted(meta.partitions))
        return codes

    def verify_produce(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       tp: TopicPartition) -> None:
        """KIP-890 part 1, the partition leader's check of a transactional Produce: ``tp`` must be in
        the producer's open transaction. Raises InvalidTxnState, or InvalidProducerEpoch for a stale
        epoch (the code Produce reports for a fenced producer)."""
        try:
            codes = self.verify_partitions(transactional_id, producer_id, producer_epoch, [tp])
        except errors.ProducerFenced as e:
            raise errors.InvalidProducerEpoch(str(e)) from None
        if codes[tp]:
            raise errors.InvalidTxnState(f"{transactional_id}: {tp[0]}-{tp[1]} is not in an open transaction of "
                                         f"producer {producer_id} epoch {producer_epoch}")

    def add_produce_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              tp: TopicPartition) -> None:
        """KIP-890 part 2, the partition leader's implicit AddPartitions for a v2 producer's transactional
        Produce: ``tp`` joins (or starts) its transaction. Raises InvalidProducerEpoch for a stale epoch
        (the code Produce reports for a fenced producer), ConcurrentTransactions while the previous one
        completes."""
        try:
            self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], TRANSACTION_VERSION_2)
        except errors.ProducerFenced as e:
            raise errors.InvalidProducerEpoch(str(e)) from None

    def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                group_id: str) -> None:
        """TxnOffsetCommit may only be sent inside the transaction, after AddOffsetsToTxn for the group."""
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta.state != TxnStatus.ONGOING or self.offsets_partition_for(group_id) not in meta.partitions:
            raise self._invalid_state(meta, f"TxnOffsetCommit for group {group_id!r}",
                                      f"group {group_id!r} not added to an open transaction (state "
                                      f"{meta.state.kafka_name})")

    # ------------------------------------------------------------------------------------------
    # TxnOffsetCommit: offsets pending until the transaction's marker
    # ------------------------------------------------------------------------------------------
    def write_txn_offsets(self, producer_id: int, producer_epoch: int, group_id: str,
                          records: list[OffsetRecord]) -> None:
        """The group coordinator's half of TxnOffsetCommit: the transactional batch and the pending
        offsets. In a cluster the group's coordinator may not be the transaction's, so it does not
        check the transaction (Kafka's does not either): the log fences a stale producer epoch and the
        marker that WriteTxnMarkers brings settles the offsets (``complete_offsets``)."""
        if not records:
            return
        if self._write_offsets is None:
            raise errors.CoordinatorNotAvailable("this transaction coordinator cannot write offsets")
        _, partition = self.offsets_partition_for(group_id)
        self._write_offsets(partition, producer_id, producer_epoch, records)
        self.pending_offsets.add(producer_id, partition, group_id, records)

    def unload_pending_offsets(self, partition: int) -> None:
        """In a cluster: another broker coordinates the groups of ``__consumer_offsets``-``partition``."""
        for key in [k for k in self.pending_offsets.pending if k[1] == partition]:
            del self.pending_offsets.pending[key]

    def load_pending_offsets(self, partition: int, open_transactions: dict[int, list[OffsetRecord]]) -> None:
        """At load: offset records of transactions still open in ``__consumer_offsets``-``partition``
        (producer id -> records, from ``txn_offsets.resolve_transactional_records``)."""
        for producer_id, records in open_transactions.items():
            self.pending_offsets.add_records(producer_id, partition, records)

    def has_pending_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset for the group's topic-partition (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT then)."""
        return self.pending_offsets.has_pending(group_id, topic, partition)

    def complete_offsets(self, producer_id: int, partition: int, commit: bool) -> None:
        """A marker was written to ``__consumer_offsets``-``partition`` (WriteTxnMarkers, in a cluster)."""
        self._complete_offsets(producer_id, [(OFFSETS_TOPIC, partition)], commit)

    def _complete_offsets(self, producer_id: int, partitions: Iterable[TopicPartition], commit: bool) -> None:
        """The markers are written: apply (commit) or drop (abort) the transaction's pending offsets."""
        for topic, partition in partitions:
            if topic != OFFSETS_TOPIC:
                continue
            records = self.pending_offsets.complete(producer_id, partition, commit)
            if records and self._apply_offsets is not None:
                self._apply_offsets([(key, value) for _group, key, value in records])

    # ------------------------------------------------------------------------------------------
    # EndTxn and completion
    # ------------------------------------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                bump_epoch: bool = False) -> ProducerIdAndEpoch:
        """EndTxn: commit or abort the open transaction. ``bump_epoch`` (EndTxn v5, transaction protocol v2):
        the epoch is bumped with it (a new producer id past the last epoch), Kafka's v2 rules apply. Returns
        the producer id and epoch the producer holds afterwards (v2 clients take them from the response)."""
        if bump_epoch:
            return self._end_txn_v2(transactional_id, producer_id, producer_epoch, commit)
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        state = meta.state
        if state != TxnStatus.ONGOING and self._refused_next.get(transactional_id) == (producer_id, producer_epoch):
            # The producer began a new transaction whose AddPartitionsToTxn was refused while the previous
            # one completed (markers pending, e.g. just after a coordinator failover), and now ends it:
            # librdkafka sends that EndTxn although no partition was added. The coordinator's state is
            # still the previous transaction's, which the producer saw end (it asked for a new one
            # only then), so this EndTxn ends an empty transaction: nothing to write. Kafka would answer
            # INVALID_TXN_STATE, fatal to the producer.
            log.info("transactional id %s: EndTxn(%s) of producer (%d, %d) ends a transaction with no partition "
                     "added (the previous one is %s): nothing to do", transactional_id,
                     "commit" if commit else "abort", producer_id, producer_epoch, state.kafka_name)
            return meta.producer_after()
        if state == TxnStatus.ONGOING:
            return self._prepare_end(meta, commit, set(meta.partitions), meta.start_ms, bump_epoch=False)
        return self._end_txn_retried(meta, commit)

    def _end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    commit: bool) -> ProducerIdAndEpoch:
        """Kafka's EndTxn table of transaction protocol v2, whose epoch moved with the producer's last EndTxn:
        a retry names the epoch before that bump (or the old producer id past an overflow), and an abort
        with no transaction open (no partition added) is accepted and bumps the epoch, so a producer can
        fence its own earlier requests after a failure it cannot classify."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state == TxnStatus.DEAD:
            raise errors.InvalidProducerIdMapping(f"unknown transactional id {transactional_id!r}")
        retry_on_overflow = (meta.last_producer_id == producer_id and producer_epoch == MAX_PRODUCER_EPOCH - 1
                             and meta.producer_epoch == 0)
        retry_on_bump = meta.producer_id == producer_id and meta.producer_epoch == producer_epoch + 1
        if meta.producer_id != producer_id and not retry_on_overflow:
            raise errors.InvalidProducerIdMapping(
                f"{transactional_id}: producer id {producer_id} != {meta.producer_id}")
        state, retried = meta.state, retry_on_bump or retry_on_overflow
        completed = state in (TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT)
        if state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
            valid = retry_on_bump
        elif completed:
            valid = retried or producer_epoch == meta.producer_epoch
        else:
            valid = producer_epoch == meta.producer_epoch
        if not valid:
            log.info("transactional id %s: fencing producer %d at epoch %d in EndTxn; the current epoch is %d (%s)",
                     transactional_id, producer_id, producer_epoch, meta.producer_epoch, state.kafka_name)
            raise errors.ProducerFenced(
                f"{transactional_id}: epoch {producer_epoch} is not the current {meta.producer_epoch}")
        if state == TxnStatus.ONGOING:
            return self._prepare_end(meta, commit, set(meta.partitions), meta.start_ms, bump_epoch=True)
        if not commit and (state == TxnStatus.EMPTY or completed and not retried):
            # an abort with no partition added: nothing to mark, the epoch bumps
            return self._prepare_end(meta, commit, set(), self.clock_ms(), bump_epoch=True)
        if completed and not retried:
            raise self._invalid_state(meta, "EndTxn(commit)", f"no transaction to commit (state {state.kafka_name})")
        return self._end_txn_retried(meta, commit)

    def _prepare_end(self, meta: TransactionMetadata, commit: bool, partitions: set[TopicPartition], start_ms: int,
                     bump_epoch: bool) -> ProducerIdAndEpoch:
        """Persist PrepareCommit/PrepareAbort (the epoch bumped for v2; at 32766 the producer id rotates, Kafka's
        order) and write or send its markers."""
        epoch, next_producer_id = meta.producer_epoch, -1
        if bump_epoch:
            epoch += 1  # never past MAX_PRODUCER_EPOCH: at 32766 the producer id rotates
            if meta.epoch_exhausted:
                next_producer_id = self._allocate_producer_id()
        prepared = TransactionMetadata(
            meta.transactional_id, meta.producer_id, epoch, meta.timeout_ms,
            TxnStatus.PREPARE_COMMIT if commit else TxnStatus.PREPARE_ABORT, partitions,
            start_ms, self.clock_ms(), meta.last_producer_id, meta.last_producer_epoch,
            next_producer_id=next_producer_id,
            client_transaction_version=TRANSACTION_VERSION_2 if bump_epoch else TRANSACTION_VERSION_0)
        self._persist(prepared)
        self._complete(prepared)
        return prepared.producer_after()

    def _end_txn_retried(self, meta: TransactionMetadata, commit: bool) -> ProducerIdAndEpoch:
        """EndTxn for a transaction already ending: a retry succeeds once its markers are written."""
        state = meta.state
        if state == TxnStatus.COMPLETE_COMMIT and commit or state == TxnStatus.COMPLETE_ABORT and not commit:
            return meta.producer_after()  # a retried EndTxn whose first attempt succeeded
        if state == TxnStatus.PREPARE_COMMIT and commit or state == TxnStatus.PREPARE_ABORT and not commit:
            self._complete(meta)
            done = self.transactions[meta.transactional_id]
            if done.state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT):
                raise errors.ConcurrentTransactions(f"{meta.transactional_id}: markers not yet written")
            return done.producer_after()
        raise self._invalid_state(meta, f"EndTxn({'commit' if commit else 'abort'})",
                                  f"cannot {'commit' if commit else 'abort'} in state {state.kafka_name}")

    @staticmethod
    def _invalid_state(meta: TransactionMetadata, request: str, why: str) -> errors.InvalidTxnState:
        """The error for a request the transaction's state does not allow, logged (the client's producer
        treats it as fatal, so the reason must be findable in the broker's log)."""
        log.info("transactional id %s: INVALID_TXN_STATE for %s of producer (%d, %d): %s (partitions %s)",
                 meta.transactional_id, request, meta.producer_id, meta.producer_epoch, why, sorted(meta.partitions))
        return errors.InvalidTxnState(f"{meta.transactional_id}: {why}")

    def _complete(self, meta: TransactionMetadata) -> bool:
        """Write the markers of a Prepare* transaction, then persist Complete*. False if markers failed
        or (in a cluster) are still being sent."""
        commit = meta.state == TxnStatus.PREPARE_COMMIT
        if self._send_markers is not None and meta.partitions:
            txn_id = meta.transactional_id
            if txn_id not in self._completing:
                self._completing.add(txn_id)
                if self._state_replicated is None:
                    self._start_markers(meta, True)
                else:
                    self._state_replicated(self.partition_for(txn_id), lambda ok: self._start_markers(meta, ok))
            return self.transactions.get(txn_id) is not meta  # completed at once (a synchronous sender)
        try:
            if meta.partitions:
                self._write_markers(meta.producer_id, meta.producer_epoch, commit,
                                    self.coordinator_epoch_for(meta.transactional_id), sorted(meta.partitions))
        except Exception:  # noqa: BLE001 - stays in Prepare*; complete_prepared() retries
            log.exception("writing %s markers for %s failed; will retry",
                          "COMMIT" if commit else "ABORT", meta.transactional_id)
            return False
        self._complete_offsets(meta.producer_id, meta.partitions, commit)
        self._persist_completion(meta)
        return True

    def _start_markers(self, meta: TransactionMetadata, replicated: bool) -> None:
        """The Prepare* record of ``meta`` is on the in-sync replicas (``replicated``): send its markers.
        Otherwise, or if the transaction changed or moved meanwhile, it stays Prepare* for a later
        ``complete_prepared()`` (or the next coordinator)."""
        txn_id = meta.transactional_id
        if not replicated or self.transactions.get(txn_id) is not meta:
            self._completing.discard(txn_id)
            return
        self._send_markers(txn_id, meta.producer_id, meta.producer_epoch, meta.state == TxnStatus.PREPARE_COMMIT,
                           self.coordinator_epoch_for(txn_id), sorted(meta.partitions),
                           lambda ok: self._markers_sent(meta, ok))

    def _markers_sent(self, meta: TransactionMetadata, ok: bool) -> None:
        """The cluster's marker sender is done with ``meta``: persist Complete* unless the transaction
        changed or moved meanwhile (the pending offsets were settled by the group coordinators that
        received the markers)."""
        txn_id = meta.transactional_id
        self._completing.discard(txn_id)
        if not ok or self.transactions.get(txn_id) is not meta:
            return  # stays Prepare*: complete_prepared() (or the next coordinator) sends again
        try:
            self._persist_completion(meta)
        except Exception as e:  # noqa: BLE001 - e.g. no longer the leader: the new coordinator completes it
            log.info("transaction %s: markers written, Complete* not persisted (%s)", txn_id, e)

    def _persist_completion(self, meta: TransactionMetadata) -> None:
        commit = meta.state == TxnStatus.PREPARE_COMMIT
        after = meta.producer_after()
        # past an epoch overflow (v2) the old producer id is kept: a retried EndTxn names it
        last_producer_id = meta.producer_id if meta.next_producer_id >= 0 else meta.last_producer_id
        done = TransactionMetadata(meta.transactional_id, after.producer_id, after.producer_epoch, meta.timeout_ms,
                                   TxnStatus.COMPLETE_COMMIT if commit else TxnStatus.COMPLETE_ABORT, set(),
                                   meta.start_ms, self.clock_ms(), last_producer_id, meta.last_producer_epoch,
                                   client_transaction_version=meta.client_transaction_version)
        self._persist(done)
        self.counts["committed" if commit else "aborted"] += 1

    def prepared_ids(self, partition: int) -> list[str]:
        """Transactional ids of ``partition`` in PrepareCommit/PrepareAbort (markers still to write)."""
        return sorted(t for t, m in self.transactions.items() if self.partition_for(t) == partition
                      and m.state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT))

    def complete_prepared(self) -> list[str]:
        """Finish every transaction in PrepareCommit/PrepareAbort (after a reload or a failed marker write)."""
        finished = []
        for meta in list(self.transactions.values()):
            if meta.state in (TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT) and self._complete(meta):
                finished.append(meta.transactional_id)
        return finished

    # ------------------------------------------------------------------------------------------
    # Periodic work (driven by the clock)
    # ------------------------------------------------------------------------------------------
    def abort_timed_out(self) -> list[str]:
        """Abort Ongoing transactions older than their timeout; the epoch is bumped so the producer
        that went quiet is fenced (its next request gets PRODUCER_FENCED)."""
        now = self.clock_ms()
        aborted = []
        for meta in list(self.transactions.values()):
            if meta.state == TxnStatus.ONGOING and meta.start_ms + meta.timeout_ms <= now:
                log.info("transaction %s (producer %d) timed out after %d ms: aborting",
                         meta.transactional_id, meta.producer_id, meta.timeout_ms)
                self.counts["timed_out"] += 1
                try:
                    self._fence_and_abort(meta, now)
                except errors.KafkaApiError:
                    pass  # stays Prepare*; complete_prepared retries
                aborted.append(meta.transactional_id)
        return aborted

    def expire_transactional_ids(self) -> list[str]:
        """Forget ids idle for ``transactional.id.expiration.ms`` (tombstone in the state topic)."""
        now = self.clock_ms()
        expired = []
        for meta in list(self.transactions.values()):
            if meta.state in (TxnStatus.EMPTY, TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT) \
                    and meta.last_update_ms + self.id_expiration_ms <= now:
                self._write_state(self.partition_for(meta.transactional_id), encode_key(meta.transactional_id), None)
                del self.transactions[meta.transactional_id]
                self._refused_next.pop(meta.transactional_id, None)
                expired.append(meta.transactional_id)
        return expired

    def tick(self) -> None:
        """One round of the periodic check."""
        self.complete_prepared()
        self.abort_timed_out()
        self.expire_transactional_ids()

    def client_transaction_version(self, transactional_id: str) -> int:
        """The transaction protocol the id's client spoke at its last transition (0 if unknown here); its
        markers name it (WriteTxnMarkers v2)."""
        meta = self.transactions.get(transactional_id)
        return meta.client_transaction_version if meta is not None else TRANSACTION_VERSION_0

    # ------------------------------------------------------------------------------------------
    # DescribeTransactions / ListTransactions
    # ------------------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> TransactionMetadata:
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state == TxnStatus.DEAD:
            raise errors.TransactionalIdNotFound(transactional_id)
        return meta

    def list_transactions(self, state_filters: Iterable[str] = (), producer_id_filters: Iterable[int] = (),
                          duration_filter_ms: int = -1, transactional_id_pattern: str | None = None,
                          ) -> tuple[list[TransactionMetadata], list[str]]:
        """(matching transactions, unknown state names) as ListTransactions v0-2 defines the filters."""
        states, unknown = set(), []
        for name in state_filters:
            st = TxnStatus.from_kafka_name(name)
            (unknown.append(name) if st is None else states.add(st))
        pids = set(producer_id_filters)
        pattern = re.compile(transactional_id_pattern) if transactional_id_pattern else None
        now = self.clock_ms()
        out = []
        for meta in sorted(self.transactions.values(), key=lambda m: m.transactional_id):
            if meta.state == TxnStatus.DEAD:
                continue
            if state_filters and meta.state not in states:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if duration_filter_ms >= 0 and (meta.start_ms < 0 or now - meta.start_ms <= duration_filter_ms):
                continue
            if pattern and not pattern.search(meta.transactional_id):
                continue
            out.append(meta)
        return out, unknown
