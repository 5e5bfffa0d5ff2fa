"""The one place a version or a timestamp is resolved: snapshot reads (a version current at a time),
incremental ranges (begin, end], and the retention horizon they are checked against."""
from __future__ import annotations

from .errors import TimeExpired, TimeNotFound, VersionExpired, VersionNotFound
from .metadata import TableMetadata
from .properties import RETAIN_HOURS

HOUR_MS = 3_600_000


class VersionResolver:
    """Resolves versions and timestamps of one metadata snapshot at one moment (``now_ms``)."""

    def __init__(self, metadata: TableMetadata, now_ms: int):
        self.md = metadata
        self.now_ms = now_ms

    @property
    def retain_hours(self) -> float:
        return self.md.setting(RETAIN_HOURS)

    def horizon(self) -> int:
        """Oldest readable version: the version current at now - acid.data.retain.hours (the latest
        version is always readable), never below what expire already removed."""
        md = self.md
        limit = self.now_ms - int(self.retain_hours * HOUR_MS)
        current = md.version_at_or_before(limit)
        return min(max(md.horizon, current if current is not None else md.horizon), md.version)

    def at(self, timestamp_ms: int) -> int:
        """The newest version committed at or before ``timestamp_ms``; -1 if the table did not exist
        yet. VersionExpired if the versions around that time were removed by retention."""
        v = self.md.version_at_or_before(timestamp_ms)
        if v is not None:
            return v
        if self.md.horizon > 0:
            # the retained history starts after ts: the versions current then are gone
            raise TimeExpired(timestamp_ms, f"is before the retention horizon (oldest retained version "
                                            f"{self.md.horizon}, acid.data.retain.hours={self.retain_hours:g})")
        return -1

    def version_at(self, timestamp_ms: int) -> int:
        """The version current at a timestamp (a snapshot read's version)."""
        v = self.at(timestamp_ms)
        if v < 0:
            raise TimeNotFound(timestamp_ms, "is before the table was created")
        return v

    def snapshot(self, version: int | None = None, timestamp: int | None = None) -> int:
        """The version a snapshot read of ``version`` / ``timestamp`` (default: latest) reads."""
        if version is not None and timestamp is not None:
            raise ValueError("give version or timestamp, not both")
        latest = self.md.version
        v = self.version_at(timestamp) if timestamp is not None else (latest if version is None else version)
        if v > latest or v < 0:
            raise VersionNotFound(f"version {v} does not exist (latest is {latest})")
        h = self.horizon()
        if v < h:
            raise VersionExpired(f"version {v} is older than the retention horizon: the oldest readable version "
                                 f"is {h} (acid.data.retain.hours={self.retain_hours:g})")
        return v

    def range(self, start_version: int | None = None, end_version: int | None = None,
              start_timestamp: int | None = None, end_timestamp: int | None = None) -> tuple[int, int]:
        """The (start, end] versions of an incremental read, by versions or by commit times."""
        latest = self.md.version
        if start_timestamp is not None or end_timestamp is not None:
            if start_version is not None or end_version is not None:
                raise ValueError("give versions or timestamps, not both")
            if start_timestamp is None:
                raise ValueError("start_timestamp is required")
            if end_timestamp is not None and end_timestamp < start_timestamp:
                raise ValueError(f"end timestamp {end_timestamp} is before start timestamp {start_timestamp} "
                                 "(an increment is (start, end])")
            s = self.at(start_timestamp)
            e = latest if end_timestamp is None else self.at(end_timestamp)
        else:
            if start_version is None:
                raise ValueError("start_version is required")
            s = start_version
            e = latest if end_version is None else end_version
        if e > latest:
            raise VersionNotFound(f"end version {e} does not exist (latest is {latest})")
        if e < s:   # never an empty increment in silence: the two were given the wrong way round
            raise ValueError(f"end version {e} is before start version {s} (an increment is (start, end])"
                             if end_version is not None else f"start version {s} is after the latest version {e}")
        h = self.horizon()
        # (s, e] needs the files of versions s+1..e, all retained iff s+1 >= horizon
        if s + 1 < h and e > s:
            raise VersionExpired(f"increment ({s}, {e}] starts before the retention horizon: the oldest retained "
                                 f"version is {h} (acid.data.retain.hours={self.retain_hours:g})")
        return s, e
