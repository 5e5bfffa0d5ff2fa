"""The seam between the data-plane handlers and storage/replication: ``PartitionService`` (append,
read, the leader checks, the acks wait) with a single-broker (``LocalPartitions``) and a ZooKeeper-
cluster (``ReplicatedPartitions``) implementation, chosen once where ``Broker`` builds its context."""
from tidelake.broker.partition_service.local import LocalPartitions
from tidelake.broker.partition_service.outcomes import AppendOutcome, PendingAcks, ReadOutcome
from tidelake.broker.partition_service.protocol import PartitionService
from tidelake.broker.partition_service.replicated import ReplicatedPartitions

__all__ = ["AppendOutcome", "LocalPartitions", "PartitionService", "PendingAcks", "ReadOutcome",
           "ReplicatedPartitions"]
