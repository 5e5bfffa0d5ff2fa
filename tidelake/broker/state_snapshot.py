"""The broker's ``BrokerStateSnapshot`` (``tidelake.observability.broker_state``), read from its components:
call on the broker's event loop, so the snapshot is one consistent moment and never races an append."""
from __future__ import annotations

from tidelake.broker.context import BrokerContext
from tidelake.coordinator.txn_log import TxnStatus
from tidelake.log import LogManager
from tidelake.observability.broker_state import BrokerStateSnapshot, GroupLag, PartitionLogState, TransactionCounts


def broker_state_snapshot(context: BrokerContext, logs: LogManager, connections: int) -> BrokerStateSnapshot:
    states = tuple(PartitionLogState(topic, partition, plog.size_bytes, len(plog.segments), plog.log_start_offset,
                                   plog.high_watermark)
                 for (topic, partition), plog in sorted(logs.all_logs().items()))
    ends = {(log.topic, log.partition): log.high_watermark for log in states}
    offsets = context.groups.offsets
    lag = []
    for group in sorted(offsets.known_groups()):
        for (topic, partition), committed in sorted(offsets.group_offsets(group).items()):
            end = ends.get((topic, partition))
            if end is not None:
                lag.append(GroupLag(group, topic, partition, committed.offset, max(0, end - committed.offset)))
    txns = context.transactions
    counts = txns.counts
    ongoing = sum(1 for m in txns.transactions.values() if m.state == TxnStatus.ONGOING)
    return BrokerStateSnapshot(
        connections=connections, logs=states, group_lag=tuple(lag),
        group_members={group_id: len(g.members) for group_id, g in context.groups.groups.items()},
        rebalances=dict(context.groups.rebalances),
        transactions=TransactionCounts(begun=counts["begun"], committed=counts["committed"],
                                       aborted=counts["aborted"], timed_out=counts["timed_out"], ongoing=ongoing),
        replication=context.partition_service.replication_state())
