"""The transaction coordinator: Kafka's transaction state machine, without network or disk. This module answers
the requests; the other ``txn_*`` modules hold its parts.

One ``TransactionMetadata`` (``txn_metadata``) per ``transactional.id``, kept by ``txn_states.TransactionStates``:
every state change is first written to the ``__transaction_state`` partition of the id and only then applied in
memory. The transitions and the epoch/producer-id rules are ``txn_transitions``; writing or sending the markers
of a Prepare* transaction and persisting its Complete* is ``txn_completion``; TxnOffsetCommit's offsets, pending
until their marker, are ``txn_offset_commits``.

States and transitions (Kafka's; the same for transaction protocol v1, the one Java 3.x and librdkafka
speak, and v2):

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
                                             \\--EndTxn(abort) / timeout / fencing--> PrepareAbort --markers--> CompleteAbort
    Empty/Complete* --InitProducerId--> Empty (epoch + 1)

In a cluster EndTxn answers once Prepare* is replicated; the transaction stays in Prepare* until its markers
are written (a new AddPartitions gets CONCURRENT_TRANSACTIONS meanwhile, as in Kafka). A coordinator owns only
the ``__transaction_state`` partitions its broker leads (``load_partition`` / ``unload_partition``).

Transactional offset commits (TxnOffsetCommit, KIP-98/447): the coordinator checks the group was added to the
transaction (``check_txn_offset_commit``), writes the records (``write_txn_offsets``) and keeps them pending
until the marker; ``has_pending_offsets`` is what OffsetFetch(require_stable) asks.

Transaction protocol v2 (KIP-890 part 2, ``transaction.version`` 2): a producer that ends its transaction with
EndTxn v5 gets its epoch bumped by every commit and abort (the markers carry the new epoch, so a zombie of the
previous transaction is fenced by every partition it wrote to). A v2 producer adds partitions implicitly: the
partition leader (Produce v12+) and the group coordinator (TxnOffsetCommit v5+) call ``add_partitions`` /
``add_offsets`` on its behalf. Each transaction remembers the protocol version its client used
(``client_transaction_version``), which decides how a retried EndTxn is recognised.

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
from tidelake.coordinator.txn_completion import TransactionCompletion
from tidelake.coordinator.txn_log import TxnStatus
from tidelake.coordinator.txn_metadata import (TRANSACTION_VERSION_0, TRANSACTION_VERSION_2, ProducerIdAndEpoch,
                                               TransactionMetadata)
from tidelake.coordinator.txn_offset_commits import TransactionalOffsets
from tidelake.coordinator.txn_outputs import (MarkerSender, MarkerWriter, OffsetRecord, OffsetsApplier, OffsetsWriter,
                                              StateReplicated, StateWriter, TopicPartition)
from tidelake.coordinator.txn_states import PREPARED, TransactionStates
from tidelake.coordinator.txn_transitions import (EndTxnStep, end_txn_v2_step, fenced_abort, initialized, ongoing,
                                                  prepared_end)

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
        self.states = TransactionStates(write_state, num_partitions, coordinator_epoch)
        self.transactions: dict[str, TransactionMetadata] = self.states.transactions
        self.partition_epochs: dict[int, int] = self.states.partition_epochs  # in a cluster: owned partitions
        self.num_partitions = num_partitions  # transaction.state.log.num.partitions
        self.offsets = TransactionalOffsets(offsets_partitions, write_offsets, apply_offsets)
        self.offsets_partitions = offsets_partitions  # offsets.topic.num.partitions
        # since this coordinator started: begun, committed, aborted, timed_out (the broker's metrics read it)
        self.counts: collections.Counter[str] = collections.Counter()
        self.completion = TransactionCompletion(self.states, self.offsets, write_markers, send_markers,
                                                state_replicated, clock_ms, self.counts)
        # transactional id -> (producer id, epoch) that asked to add partitions to a new transaction while
        # the previous one was still completing (refused with CONCURRENT_TRANSACTIONS); see end_txn
        self._refused_next: dict[str, tuple[int, int]] = {}
        self._allocate_producer_id = allocate_producer_id
        self.clock_ms = clock_ms
        self.max_timeout_ms = max_timeout_ms  # transaction.max.timeout.ms
        self.id_expiration_ms = id_expiration_ms  # transactional.id.expiration.ms

    # ------------------------------------------------------------------------------------------
    # The __transaction_state partitions held here
    # ------------------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return self.states.partition_for(transactional_id)

    def load_partition(self, partition: int, coordinator_epoch: int,
                       records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """In a cluster: this coordinator now owns ``__transaction_state``-``partition`` (its broker
        became the leader in ``coordinator_epoch``): replay its records. Call ``complete_prepared()``
        afterwards. Returns the number of records applied."""
        self.unload_partition(partition)
        return self.states.load_partition(partition, coordinator_epoch, records)

    def unload_partition(self, partition: int) -> list[str]:
        """In a cluster: another broker coordinates ``partition`` now; forget its transactions (a
        marker send still running for one of them ends without writing Complete*)."""
        gone = self.states.unload_partition(partition)
        for t in gone:
            self.completion.forget(t)
            self._refused_next.pop(t, None)
        return gone

    def load(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Replay ``__transaction_state`` records (key, value) in log order; the last value wins.

        Call ``complete_prepared()`` afterwards to finish transactions caught in Prepare*.
        Returns the number of records applied.
        """
        return self.states.load(records)

    def prepared_ids(self, partition: int) -> list[str]:
        """Transactional ids of ``partition`` in PrepareCommit/PrepareAbort (markers still to write)."""
        return self.states.prepared_ids(partition)

    def complete_prepared(self) -> list[str]:
        """Finish every transaction in PrepareCommit/PrepareAbort (after a reload or a failed marker write)."""
        return self.completion.complete_prepared()

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
            return self._initialize(meta, transaction_timeout_ms, now)

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

        if meta.state in PREPARED:
            # markers still to be written (an earlier write failed): finish now, else tell the client to retry
            self.completion.complete(meta)
            meta = self.transactions[transactional_id]
            if meta.state in PREPARED:
                raise errors.ConcurrentTransactions(f"{transactional_id} is completing")
        if meta.state == TxnStatus.ONGOING:
            # A new session of the same transactional id: fence the old one (epoch + 1) and abort its
            # transaction with the fenced epoch; the markers make the old session's writes invisible.
            meta = self._fence_and_abort(meta, now)
        if meta.state == TxnStatus.DEAD:
            raise errors.ConcurrentTransactions(f"{transactional_id} is being expired")
        return self._initialize(meta, transaction_timeout_ms, now)

    def _initialize(self, meta: TransactionMetadata, timeout_ms: int, now: int) -> ProducerIdAndEpoch:
        new = initialized(meta, timeout_ms, now, self._allocate_producer_id)
        self.states.persist(new)
        self._refused_next.pop(meta.transactional_id, None)
        log.info("InitProducerId %s -> producer id %d epoch %d", meta.transactional_id, new.producer_id,
                 new.producer_epoch)
        return ProducerIdAndEpoch(new.producer_id, new.producer_epoch)

    def _fence_and_abort(self, meta: TransactionMetadata, now: int) -> TransactionMetadata:
        """Bump the epoch (so the current holder is fenced) and abort the open transaction."""
        prepared = fenced_abort(meta, now, self._allocate_producer_id)
        self.states.persist(prepared)
        self.completion.complete(prepared)
        done = self.transactions[meta.transactional_id]
        if done.state != TxnStatus.COMPLETE_ABORT:
            raise errors.ConcurrentTransactions(f"{meta.transactional_id}: abort of the fenced transaction pending")
        return done

    # ------------------------------------------------------------------------------------------
    # AddPartitionsToTxn / AddOffsetsToTxn
    # ------------------------------------------------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state == TxnStatus.DEAD or meta.producer_id != producer_id:
            raise self._unknown_producer_id(meta, transactional_id, producer_id)
        if producer_epoch != meta.producer_epoch:
            log.info("transactional id %s: fencing producer %d at epoch %d; the current epoch is %d",
                     transactional_id, producer_id, producer_epoch, meta.producer_epoch)
            raise errors.ProducerFenced(
                f"{transactional_id}: epoch {producer_epoch} is not the current {meta.producer_epoch}")
        return meta

    @staticmethod
    def _unknown_producer_id(meta: TransactionMetadata | None, transactional_id: str,
                             producer_id: int) -> errors.InvalidProducerIdMapping:
        if meta is None or meta.state == TxnStatus.DEAD:
            return errors.InvalidProducerIdMapping(f"unknown transactional id {transactional_id!r}")
        return errors.InvalidProducerIdMapping(f"{transactional_id}: producer id {producer_id} != {meta.producer_id}")

    @staticmethod
    def _invalid_state(meta: TransactionMetadata, request: str, why: str) -> errors.InvalidTxnState:
        """The error for a request the transaction's state does not allow, logged (the client's producer
        treats it as fatal, so the reason must be findable in the broker's log)."""
        log.info("transactional id %s: INVALID_TXN_STATE for %s of producer (%d, %d): %s (partitions %s)",
                 meta.transactional_id, request, meta.producer_id, meta.producer_epoch, why, sorted(meta.partitions))
        return errors.InvalidTxnState(f"{meta.transactional_id}: {why}")

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition],
                       client_transaction_version: int = TRANSACTION_VERSION_0) -> None:
        """Add partitions to the producer's transaction (starting it if none is open).
        ``client_transaction_version`` 2: asked on a v2 producer's behalf (Produce v12+, TxnOffsetCommit v5+,
        AddPartitionsToTxn v5 between brokers)."""
        current = self.transactions.get(transactional_id)
        if current is not None and current.state in PREPARED \
                and current.next_producer_id >= 0 and (producer_id, producer_epoch) == current.producer_after():
            # v2, past an epoch overflow: the producer already holds the new id its EndTxn returned, the
            # markers of the old one are still being written (not a mapping error: it retries)
            raise errors.ConcurrentTransactions(f"{transactional_id}: previous transaction still completing")
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        wanted = set(partitions)
        if meta.state in PREPARED:
            # the producer saw its EndTxn succeed and begins the next transaction: remembered for end_txn
            if self._refused_next.get(transactional_id) != (producer_id, producer_epoch):  # (usual: DEBUG)
                log.debug("transactional id %s: producer (%d, %d) begins a transaction while the previous one is "
                         "%s: CONCURRENT_TRANSACTIONS until its markers are written", transactional_id, producer_id,
                         producer_epoch, meta.state.kafka_name)
            self._refused_next[transactional_id] = (producer_id, producer_epoch)
            self.completion.complete(meta)  # normally already complete; retry a failed marker write
            raise errors.ConcurrentTransactions(f"{transactional_id}: previous transaction still completing")
        if meta.state == TxnStatus.PREPARE_EPOCH_FENCE:
            raise errors.ConcurrentTransactions(f"{transactional_id}: being fenced")
        if meta.state == TxnStatus.ONGOING and wanted <= meta.partitions:
            return
        starting = meta.state != TxnStatus.ONGOING
        self.states.persist(ongoing(meta, wanted, self.clock_ms(), client_transaction_version))
        self._refused_next.pop(transactional_id, None)
        if starting:
            self.counts["begun"] += 1

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    group_id: str, client_transaction_version: int = TRANSACTION_VERSION_0) -> TopicPartition:
        """AddOffsetsToTxn (or, v2, TxnOffsetCommit v5+): the group's ``__consumer_offsets`` partition joins
        the transaction."""
        tp = self.offsets.partition_for(group_id)
        self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], client_transaction_version)
        return tp

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ ``verify_only``: error code per partition, 0 if it is in the open
        transaction of this producer (KIP-890 part 1), INVALID_TXN_STATE otherwise."""
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        is_ongoing = meta.state == TxnStatus.ONGOING
        codes = {tp: 0 if is_ongoing and tp in meta.partitions else errors.InvalidTxnState.code for tp in partitions}
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
        if meta.state != TxnStatus.ONGOING or self.offsets.partition_for(group_id) not in meta.partitions:
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
        self.offsets.write(producer_id, producer_epoch, group_id, records)

    def unload_pending_offsets(self, partition: int) -> None:
        """In a cluster: another broker coordinates the groups of ``__consumer_offsets``-``partition``."""
        self.offsets.unload(partition)

    def load_pending_offsets(self, partition: int, open_transactions: dict[int, list[OffsetRecord]]) -> None:
        """At load: offset records of transactions still open in ``__consumer_offsets``-``partition``
        (producer id -> records, from ``txn_offsets.resolve_transactional_records``)."""
        self.offsets.load(partition, open_transactions)

    def has_pending_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset for the group's topic-partition (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT then)."""
        return self.offsets.has_pending(group_id, topic, partition)

    def complete_offsets(self, producer_id: int, partition: int, commit: bool) -> None:
        """A marker was written to ``__consumer_offsets``-``partition`` (WriteTxnMarkers, in a cluster)."""
        self.offsets.settle(producer_id, [(OFFSETS_TOPIC, partition)], commit)

    # ------------------------------------------------------------------------------------------
    # EndTxn
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
        meta = self.transactions.get(transactional_id)
        step = end_txn_v2_step(meta, producer_id, producer_epoch, commit)
        if step == EndTxnStep.UNKNOWN_PRODUCER_ID:
            raise self._unknown_producer_id(meta, transactional_id, producer_id)
        if step == EndTxnStep.FENCED:
            log.info("transactional id %s: fencing producer %d at epoch %d in EndTxn; the current epoch is %d (%s)",
                     transactional_id, producer_id, producer_epoch, meta.producer_epoch, meta.state.kafka_name)
            raise errors.ProducerFenced(
                f"{transactional_id}: epoch {producer_epoch} is not the current {meta.producer_epoch}")
        if step == EndTxnStep.NOTHING_TO_COMMIT:
            raise self._invalid_state(meta, "EndTxn(commit)",
                                      f"no transaction to commit (state {meta.state.kafka_name})")
        if step == EndTxnStep.PREPARE:
            return self._prepare_end(meta, commit, set(meta.partitions), meta.start_ms, bump_epoch=True)
        if step == EndTxnStep.ABORT_EMPTY:
            return self._prepare_end(meta, commit, set(), self.clock_ms(), bump_epoch=True)
        return self._end_txn_retried(meta, commit)

    def _prepare_end(self, meta: TransactionMetadata, commit: bool, partitions: set[TopicPartition], start_ms: int,
                     bump_epoch: bool) -> ProducerIdAndEpoch:
        """Persist PrepareCommit/PrepareAbort and write or send its markers."""
        prepared = prepared_end(meta, commit, partitions, start_ms, self.clock_ms(), bump_epoch,
                                self._allocate_producer_id)
        self.states.persist(prepared)
        self.completion.complete(prepared)
        return prepared.producer_after()

    def _end_txn_retried(self, meta: TransactionMetadata, commit: bool) -> ProducerIdAndEpoch:
        """EndTxn for a transaction already ending: a retry succeeds once its markers are written."""
        state = meta.state
        if state == TxnStatus.COMPLETE_COMMIT and commit or state == TxnStatus.COMPLETE_ABORT and not commit:
            return meta.producer_after()  # a retried EndTxn whose first attempt succeeded
        if state == TxnStatus.PREPARE_COMMIT and commit or state == TxnStatus.PREPARE_ABORT and not commit:
            self.completion.complete(meta)
            done = self.transactions[meta.transactional_id]
            if done.state in PREPARED:
                raise errors.ConcurrentTransactions(f"{meta.transactional_id}: markers not yet written")
            return done.producer_after()
        raise self._invalid_state(meta, f"EndTxn({'commit' if commit else 'abort'})",
                                  f"cannot {'commit' if commit else 'abort'} in state {state.kafka_name}")

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
                self.states.remove(meta.transactional_id)
                self._refused_next.pop(meta.transactional_id, None)
                expired.append(meta.transactional_id)
        return expired

    def tick(self) -> None:
        """One round of the periodic check."""
        self.complete_prepared()
        self.abort_timed_out()
        self.expire_transactional_ids()

    # ------------------------------------------------------------------------------------------
    # DescribeTransactions / ListTransactions
    # ------------------------------------------------------------------------------------------
    def client_transaction_version(self, transactional_id: str) -> int:
        """The transaction protocol the id's client spoke at its last transition (0 if unknown here); its
        markers name it (WriteTxnMarkers v2)."""
        meta = self.transactions.get(transactional_id)
        return meta.client_transaction_version if meta is not None else TRANSACTION_VERSION_0

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
