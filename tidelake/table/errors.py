"""Errors raised by the transactional table. All derive from :class:`TableError`."""
from __future__ import annotations


class TableError(Exception):
    """Base class of every table error."""


class TableNotFound(TableError):
    """No table (no metadata log) at the given path."""


class TableExists(TableError):
    """Table.create on a path that already holds a table."""


class CommitConflict(TableError):
    """The later of two conflicting jobs fails (MaxCompute's conflict table, SPEC T4).

    ``this_operation`` is the failing job's operation, ``other_operation`` / ``other_version`` the
    commit it conflicts with, ``rule`` the row of the conflict table that applies.
    """

    def __init__(self, this_operation: str, read_version: int, other_operation: str,
                 other_version: int, rule: str):
        self.this_operation = this_operation
        self.read_version = read_version
        self.other_operation = other_operation
        self.other_version = other_version
        self.rule = rule
        super().__init__(
            f"commit conflict: this {this_operation} (started at version {read_version}) conflicts "
            f"with {other_operation} committed at version {other_version} ({rule}); "
            f"re-run the {this_operation} against the new version")


class VersionExpired(TableError):
    """A read of a version/time older than the retention horizon (acid.data.retain.hours)."""


class VersionNotFound(TableError):
    """A version or timestamp outside the table's history (in the future, or before creation)."""


class TimeNotFound(VersionNotFound):
    """A time before the table was created. ``timestamp_ms`` and ``reason`` apart, so a caller can name the
    time as its user wrote it."""

    def __init__(self, timestamp_ms: int, reason: str):
        self.timestamp_ms = timestamp_ms
        self.reason = reason
        super().__init__(f"timestamp {timestamp_ms} {reason}")


class TimeExpired(VersionExpired):
    """A time whose versions were removed by retention (``timestamp_ms``, ``reason`` as in TimeNotFound)."""

    def __init__(self, timestamp_ms: int, reason: str):
        self.timestamp_ms = timestamp_ms
        self.reason = reason
        super().__init__(f"timestamp {timestamp_ms} {reason}")


class SchemaError(TableError):
    """Data that does not fit the table schema (missing primary key, null key, bad type)."""


class CorruptLog(TableError):
    """The table's metadata log is damaged: a version missing between others, or an entry or
    checkpoint that cannot be read. Never read around: the table would silently show an older state
    and a commit on top would fork its history. ``path`` names the file; ``tidelake table check``
    reports every problem and ``--repair`` fixes what can be fixed safely."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"table log damaged: {path}: {reason}")


class CorruptDataFile(TableError):
    """A data file the log references cannot be read as the Parquet file it was written as."""

    def __init__(self, path: str, reason: str):
        self.path = path
        reason = " ".join(reason.split())   # pyarrow's messages span lines
        super().__init__(f"data file damaged: {path}: {reason} (`tidelake table check` lists every damaged file)")
