"""Storage engine: segmented, indexed, recoverable partition logs (bytes and offsets, no sockets).

Public API: LogConfig, PartitionLog (+ AppendResult, ReadResult, CompactionStats), LogManager,
ProducerStateManager, LeaderEpochCache. See each module's docstrings for the exact contract.
"""
from tidelake.log.config import LogConfig
from tidelake.log.epoch import LeaderEpochCache
from tidelake.log.manager import LogManager, partition_dir_name
from tidelake.log.partition import AppendResult, CompactionStats, OffsetPosition, PartitionLog, ReadResult
from tidelake.log.producer_state import ProducerStateManager

__all__ = ["LogConfig", "PartitionLog", "AppendResult", "ReadResult", "CompactionStats", "OffsetPosition",
           "LogManager", "ProducerStateManager", "LeaderEpochCache", "partition_dir_name"]
