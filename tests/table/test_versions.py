"""The one version/timestamp resolver: snapshot versions, (begin, end] ranges, the retention horizon."""
from __future__ import annotations

import pyarrow as pa
import pytest

from tidelake.table import Table, VersionExpired, VersionNotFound
from tidelake.table.versions import VersionResolver
from tests.table.manual_clock import HOUR, ManualClock



def test_timestamps_resolve_the_same_way_for_snapshots_and_ranges(tmp_path):
    clock = ManualClock(10 * HOUR)
    t = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), ["id"],
                     {"acid.data.retain.hours": "1", "retention.auto": "false", "clustering.auto": "false"},
                     clock=clock)
    for i in range(1, 4):
        clock.now = 10 * HOUR + i * 1000
        t.upsert(pa.table({"id": [i]}))
    r = VersionResolver(t.metadata, clock.now)
    assert r.at(10 * HOUR + 2500) == 2 == t.version_at(10 * HOUR + 2500)
    assert r.at(10 * HOUR - 1) == -1                       # before creation: an empty range start
    with pytest.raises(VersionNotFound):
        t.version_at(10 * HOUR - 1)                        # ... but no snapshot
    assert t.resolve_range(start_timestamp=10 * HOUR - 1, end_timestamp=10 * HOUR + 2000) == (-1, 2)
    assert r.snapshot() == 3 and r.snapshot(timestamp=10 * HOUR + 1000) == 1
    with pytest.raises(ValueError):
        r.snapshot(1, 10 * HOUR)
    clock.now += 2 * HOUR                                  # horizon: the version current an hour ago
    assert VersionResolver(t.metadata, clock.now).horizon() == 3
    with pytest.raises(VersionExpired):
        t.scan(version=2)
    with pytest.raises(VersionExpired):
        t.changes(start_version=1)
    t.expire()
    with pytest.raises(VersionExpired):                    # history gone: times before it are too
        t.version_at(10 * HOUR + 1500)
    with pytest.raises(VersionExpired):
        t.resolve_range(start_timestamp=10 * HOUR + 1500)
