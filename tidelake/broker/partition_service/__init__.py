"""The seam between the handlers and storage/replication: ``PartitionService`` (append, read, DeleteRecords,
ListOffsets, OffsetForLeaderEpoch, producers, log dirs; the leader checks, the acks and low-watermark waits)
with a single-broker (``LocalPartitions``) and a ZooKeeper-cluster (``ReplicatedPartitions``) implementation,
chosen once where ``Broker`` builds its context."""
from tidelake.broker.partition_service.local import LocalPartitions
from tidelake.broker.partition_service.outcomes import (AppendOutcome, DeleteOutcome, ListedOffset, LogDirDescription,
                                                        PendingAcks, ReadOutcome)
from tidelake.broker.partition_service.protocol import PartitionService
from tidelake.broker.partition_service.replicated import ReplicatedPartitions

__all__ = ["AppendOutcome", "DeleteOutcome", "ListedOffset", "LocalPartitions", "LogDirDescription",
           "PartitionService", "PendingAcks", "ReadOutcome", "ReplicatedPartitions"]
