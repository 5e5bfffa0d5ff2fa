"""``spark.readStream.format("tidelake")``: a table's change feed as a Spark stream, version by version.

Options (besides ``path`` / ``storageOptions``, as for batch reads):

===========================  ==================================================================
``startingVersion``          required (or ``startingTimestamp``): a version — the stream reads the
                             changes committed after it, (v, ...], as the batch incremental read
                             does (0: every change since the table was created) — or ``latest``:
                             only changes committed after the query starts
``startingTimestamp``        epoch ms or ISO-8601: the changes committed after that time
``readChangeFeed``           ``true``: before-images, as Delta's change data feed — ``_op`` is
                             ``insert`` / ``update_preimage`` + ``update_postimage`` / ``delete``
                             (see tidelake/table/change_feed.py); default ``false``: ``_op`` is
                             ``upsert`` / ``delete``, a delete carrying only its key
``maxVersionsPerTrigger``    at most N table versions per micro-batch
``maxRowsPerTrigger``        at most N changes (rows the commits wrote) per micro-batch
===========================  ==================================================================

Every row also has ``_commit_version`` and ``_commit_time``. The stream's offset is ``{"version": v}``:
the last version a micro-batch includes (Spark keeps it in the checkpoint, so a restarted query goes
on after it). A version is never split: the caps admit whole versions, at least one per batch. A version
written by compaction or clustering has no changes (it moves the offset on, with no rows).

Admission control follows Spark's contract (4.2+ ``latestOffset(start, limit)``): with either cap set
``getDefaultReadLimit`` is ``ReadMaxRows`` (``maxRowsPerTrigger``, or no row cap when only versions
are capped); ``ReadAllAvailable`` (Trigger.Once) ignores both caps. ``Trigger.AvailableNow`` reads up to
the latest version at the query's start, still in capped batches.

The next version to read must still be within ``acid.data.retain.hours`` (with ``readChangeFeed``, so must
the version before it: the before-images are looked up there): else the query fails with
``VersionExpired`` naming that property. Each micro-batch has one Spark partition per bucket holding
changes; a task reads its bucket's changes and looks its before-images up in that bucket only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from tidelake.clock import parse_timestamp_ms
from tidelake.table import Table, VersionExpired, VersionNotFound

# Java's Long.MAX_VALUE: "no row cap" while still asking Spark for admission control.
NO_ROW_LIMIT = 2**63 - 1
CHANGE_COLUMNS = ("_op", "_commit_version", "_commit_time")


def _positive(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be a positive integer, not {raw!r}") from None
    if value < 1:
        raise ValueError(f"option {name} must be a positive integer, not {raw!r}")
    return value


def is_true(options: Mapping[str, str], name: str) -> bool:
    raw = str(options.get(name, "false")).strip().lower()
    if raw not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, not {options.get(name)!r}")
    return raw == "true"


@dataclass(frozen=True)
class StreamOptions:
    """The stream-only options of ``readStream.format("tidelake")``."""
    starting_version_option: str | None
    starting_timestamp_ms: int | None
    before_images: bool
    max_versions_per_trigger: int | None
    max_rows_per_trigger: int | None

    def starting_version(self, table: Table) -> int:
        """The version a new query starts after."""
        if self.starting_timestamp_ms is not None:
            return table.resolve_range(start_timestamp=self.starting_timestamp_ms)[0]
        latest = table.version
        if self.starting_version_option == "latest":
            return latest
        version = int(self.starting_version_option)
        if version > latest:   # (else the stream would wait, silently, for versions that may never come)
            raise VersionNotFound(f"startingVersion {version} does not exist in table {table.path} (latest is "
                                  f"{latest})")
        return version

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "StreamOptions":
        if options.get("startingVersion") is None and options.get("startingTimestamp") is None:
            raise ValueError("a tidelake stream reads the table's changes: give option startingVersion "
                             "(a version, or 'latest') or startingTimestamp")
        if options.get("endingVersion") is not None or options.get("endingTimestamp") is not None:
            raise ValueError("endingVersion / endingTimestamp are for batch reads; a stream has no end")
        version = options.get("startingVersion")
        if version is not None and options.get("startingTimestamp") is not None:
            raise ValueError("give startingVersion or startingTimestamp, not both")
        if version is not None:
            version = str(version).strip().lower()
            if version != "latest" and not version.isdigit():
                raise ValueError(f"option startingVersion must be a version (>= 0) or 'latest', not {version!r}")
        timestamp = options.get("startingTimestamp")
        return cls(starting_version_option=version,
                   starting_timestamp_ms=parse_timestamp_ms(timestamp) if timestamp is not None else None,
                   before_images=is_true(options, "readChangeFeed"),
                   max_versions_per_trigger=_positive(options, "maxVersionsPerTrigger"),
                   max_rows_per_trigger=_positive(options, "maxRowsPerTrigger"))


def admit_versions(start: int, latest: int, rows: Mapping[int, int], max_rows: int | None,
                   max_versions: int | None) -> int:
    """The last version of the next micro-batch after ``start``: whole versions up to ``latest``, at most
    ``max_versions`` of them and ``max_rows`` changes (``rows``: changes per version; absent: none), but
    at least one version."""
    end, total = start, 0
    for v in range(start + 1, latest + 1):
        r = rows.get(v, 0)
        if end > start and ((max_versions is not None and end - start >= max_versions)
                            or (max_rows is not None and total + r > max_rows)):
            break
        end, total = v, total + r
    return end


class ChangesPartition(InputPartition):
    """One bucket's changes over the versions (start, end] (picklable)."""

    def __init__(self, start: int, end: int, bucket: int):
        super().__init__((start, end, bucket))
        self.start = start
        self.end = end
        self.bucket = bucket


class TableStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader of a table's changes. Lives in one long-running Python process on the driver;
    ``read`` runs on executors from a pickled copy (its ``Table`` catches up with the log there)."""

    def __init__(self, table: Table, options: StreamOptions, schema: StructType):
        self.table = table
        self.options = options
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        missing = [c for c in CHANGE_COLUMNS if c not in self.arrow_schema.names]
        if missing:
            raise ValueError(f"the stream's schema lacks {missing}: read a stream with option startingVersion "
                             f"or startingTimestamp")
        self.available_now_target: int | None = None
        self.last_seen_latest: int | None = None   # from the last latestOffset(), for progress reports

    def initialOffset(self) -> dict:
        # (only a new query asks: a restarted one goes on from its checkpoint)
        return {"version": self.options.starting_version(self.table)}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_rows_per_trigger or self.options.max_versions_per_trigger:
            return ReadMaxRows(self.options.max_rows_per_trigger or NO_ROW_LIMIT)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now_target = self.table.refresh()

    def _check_retained(self, start: int, latest: int) -> None:
        """Fail, naming acid.data.retain.hours, if the versions after ``start`` (and, for before-images,
        ``start`` itself) were removed by retention."""
        try:
            self.table.plan(start_version=start, end_version=latest)
            if self.options.before_images and start > 0:
                self.table.plan(version=start)
        except VersionExpired as e:
            raise VersionExpired(f"the stream of table {self.table.path} cannot go on after version {start}: "
                                 f"{e}") from None

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start["version"])
        latest = self.available_now_target if self.available_now_target is not None else self.table.refresh()
        self.last_seen_latest = latest
        if latest <= begin:
            return {"version": begin}
        self._check_retained(begin, latest)
        if not isinstance(limit, ReadMaxRows):
            return {"version": latest}
        rows: dict[int, int] = {}
        for f in self.table.plan(start_version=begin, end_version=latest):
            rows[f.min_version] = rows.get(f.min_version, 0) + f.rows
        max_rows = limit.max_rows if limit.max_rows < NO_ROW_LIMIT else None
        return {"version": admit_versions(begin, latest, rows, max_rows, self.options.max_versions_per_trigger)}

    def reportLatestOffset(self) -> dict | None:
        # Spark asks right after latestOffset(); that answer is fresh enough.
        latest = self.last_seen_latest if self.last_seen_latest is not None else self.table.refresh()
        return {"version": latest}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, last = int(start["version"]), int(end["version"])
        if last <= begin:
            return []
        buckets = sorted({f.bucket for f in self.table.plan(start_version=begin, end_version=last)})
        return [ChangesPartition(begin, last, b) for b in buckets]

    def read(self, partition: ChangesPartition) -> Iterator[pa.RecordBatch]:
        data = self.table.changes(start_version=partition.start, end_version=partition.end,
                                  before_images=self.options.before_images, buckets={partition.bucket})
        yield from conform_changes(data, self.arrow_schema).to_batches(max_chunksize=65_536)

    def commit(self, end: dict) -> None:
        # Progress lives in Spark's checkpoint; the table is not written to.
        pass


def conform_changes(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` as the stream's ``schema``, fixed when the query started: a column added to the table since
    is left out, a column the range's schema does not have yet reads as nulls."""
    columns = [data.column(f.name) if f.name in data.column_names else pa.nulls(data.num_rows, f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, names=schema.names).cast(schema)
