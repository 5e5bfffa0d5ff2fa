"""Transactional primary-key table (seed 003's Transactional Table 2.0), pyarrow only (no Spark).

Format (a directory, or a prefix of an object store: ``s3://bucket/prefix``, ``memory://name``; see
``tidelake.storage``)::

    _tidelake_log/00000000000000000012.json      one entry per version, published with put-if-absent
    _tidelake_log/00000000000000000010.checkpoint.json, _last_checkpoint   replayed state, every N versions
    data/bucket-00003/delta-L0-<uuid>.parquet     one data commit's rows of bucket 3 (one row per key)
    data/bucket-00003/delta-L1-<uuid>.parquet     clustering output (L2 likewise): every row of its inputs
    data/bucket-00003/base-<uuid>.parquet         compaction output: merged state, one row per key

Data files are LZ4 Parquet sorted by the primary key; bucket = stable hash(PK) mod write.bucket.num
(``bucket_ids``). Delta files carry ``_op`` (0 upsert, 1 delete); clustered files also
``_commit_version``/``_commit_time`` per row; an L0 file's commit version/time are its log entry's.
A log entry (``metadata.LogEntry``) holds version, timestamp_ms, operation, read_version and typed
actions (add/remove file, set properties, change schema, set app state); its JSON form (add, remove,
schema, properties, app, buckets, ...) is the file on disk.

Reads: per bucket the newest live base + live deltas with rows newer than it, last change per key
wins (merge on read). Incremental reads (start, end] read only L0 delta files committed in range.
``Table.snapshot()`` pins one version in a small picklable handle (Spark tasks read buckets and stage
files from it without the log). Automatic clustering, compaction and retention run after data
commits in a background thread (``table.maintenance.wait()``; ``maintenance.mode=inline`` runs them
inside the commit).

Properties (``properties.py``, their one home: type, default, allowed values, meaning): transactional,
write.bucket.num, acid.data.retain.hours, retention.auto, retention.check.commit.num, clustering.auto,
clustering.l0.num, clustering.l1.num, clustering.keep.every.row (false: clustering keeps each key's newest
row only), clustering.max.file.bytes, clustering.max.time.span.hours,
compaction.delta.num, compaction.commit.num, compaction.parallelism, checkpoint.interval, maintenance.mode,
changelog.producer (``lookup``: data commits write change files with the change feed's
before-images, ``data/bucket-NNNNN/change-<uuid>.parquet``), changelog.lookup.cache.bytes, view.formats,
merge-engine (deduplicate, partial-update, aggregation, first-row: ``merge_engine.py``; applied by the
commit, ``engine_commit.py``), sequence.field, fields.<column>.aggregate-function,
aggregation.remove-record-on-delete; users' own properties go under ``user.`` (any other name is refused).
"""
from .commit import conflict_rule
from .errors import (CommitConflict, CorruptDataFile, CorruptLog, SchemaError, TableError, TableExists,
                     TableNotFound, VersionExpired, VersionNotFound)
from .files import DataFile, FilePlan, bucket_ids
from .properties import TABLE_PROPERTIES, USER_PREFIX, InvalidProperty
from .schema import parse_schema
from .snapshot import Snapshot
from .table import Table, Transaction

__all__ = ["Table", "Transaction", "Snapshot", "DataFile", "FilePlan", "bucket_ids", "conflict_rule",
           "TABLE_PROPERTIES", "USER_PREFIX", "InvalidProperty", "parse_schema", "TableError", "TableExists",
           "TableNotFound", "CommitConflict", "VersionExpired", "VersionNotFound", "SchemaError", "CorruptLog",
           "CorruptDataFile"]
