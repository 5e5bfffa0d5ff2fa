"""Tiered storage (KIP-405): a tiered topic's closed segments copied to an object store
(``tidelake.storage``: S3 with conditional writes, or a path), deleted locally past local retention,
and read back transparently below the local log start.

- ``settings.py`` ``RemoteLogSettings``: the broker's remote.log.* configs;
- ``metadata.py`` ``RemotePartitionMetadata``, ``RemoteSegment``: the remote segments and their states
  (COPY_STARTED -> COPY_FINISHED -> DELETE_STARTED -> DELETE_FINISHED), kept in the store itself;
- ``manager.py`` ``RemoteLogManager``: copies, remote and local retention, crash leftovers, on its thread;
- ``reader.py`` ``RemoteLogReader``: Fetch below the local log start (ranged GETs, index and chunk
  caches, read-ahead into the next segment), never waiting on the caller's thread.
"""
from tidelake.log.remote.manager import RemoteLogManager
from tidelake.log.remote.metadata import (NO_OFFSET, OffsetAndEpoch, RemotePartitionMetadata, RemoteSegment,
                                          RemoteSegmentState)
from tidelake.log.remote.reader import RemoteLogReader, RemoteRead, TimestampOffset
from tidelake.log.remote.settings import RemoteLogSettings

__all__ = ["NO_OFFSET", "OffsetAndEpoch", "RemoteLogManager", "RemoteLogReader", "RemoteLogSettings",
           "RemotePartitionMetadata", "RemoteRead", "RemoteSegment", "RemoteSegmentState", "TimestampOffset"]
