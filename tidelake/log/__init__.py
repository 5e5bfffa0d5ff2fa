"""Storage engine: segmented, indexed, recoverable partition logs (bytes and offsets, no sockets).

Public API: LogConfig, PartitionLog (+ AppendResult, ReadResult, OffsetPosition), LogManager,
ProducerStateManager, LeaderEpochCache, LogCleaner (+ CompactionStats), InvalidRecord. The storage
shapes are Kafka's: PartitionLog (UnifiedLog) over a LocalLog of Segments, each with its OffsetIndex,
TimeIndex and TransactionIndex; LogLoader opens and recovers a partition directory; LogMaintenance
is the background thread. See each module's docstring.
"""
from tidelake.log.cleaner import CompactionStats, LogCleaner
from tidelake.log.config import LogConfig
from tidelake.log.epoch import LeaderEpochCache
from tidelake.log.manager import LogManager, partition_dir_name
from tidelake.log.partition import PartitionLog
from tidelake.log.results import AppendResult, OffsetPosition, ReadResult
from tidelake.log.producer_state import ProducerStateManager
from tidelake.errors import InvalidRecord

__all__ = ["LogConfig", "PartitionLog", "AppendResult", "ReadResult", "CompactionStats", "OffsetPosition",
           "LogManager", "ProducerStateManager", "LeaderEpochCache", "LogCleaner", "InvalidRecord",
           "partition_dir_name"]
