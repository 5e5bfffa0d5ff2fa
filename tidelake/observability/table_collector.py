"""A table's metrics, read at scrape time: its latest version, its live data files, bytes and rows per
bucket, level and kind (from the metadata log, so another process's commits show too), and what this
process's ``Table`` object counted (``TableStats``: commit retries and conflicts, compaction and
clustering runs with their durations). Any process can register one per table it opens."""
from __future__ import annotations

import os
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector


class TableCollector(Collector):
    def __init__(self, table: Any, name: str | None = None):
        """``table``: a ``tidelake.table.Table``; ``name``: its ``table`` label (default: the directory name)."""
        self.table = table
        self.name = name or os.path.basename(table.path.rstrip(os.sep))

    def collect(self):
        md = self.table.metadata  # as the table object last read it (the pipeline refreshes it each batch)
        label = [self.name]
        version = GaugeMetricFamily("tidelake_table_version", "The table's latest committed version",
                                    labels=["table"])
        version.add_metric(label, md.version)
        yield version
        per: dict[tuple[str, str, str], list[int]] = {}
        for fe in md.live_files(md.version):
            f = fe.file
            totals = per.setdefault((str(f.bucket), str(f.level), f.kind), [0, 0, 0])
            totals[0] += 1
            totals[1] += f.bytes
            totals[2] += f.rows
        labels = ["table", "bucket", "level", "kind"]
        files = GaugeMetricFamily("tidelake_table_files", "Live data files per bucket, level and kind "
                                  "(base, delta)", labels=labels)
        size = GaugeMetricFamily("tidelake_table_size_bytes", "Bytes of live data files per bucket, level and kind",
                                 labels=labels)
        rows = GaugeMetricFamily("tidelake_table_file_rows", "Rows in live data files per bucket, level and kind "
                                 "(deltas count every change)", labels=labels)
        for (bucket, level, kind), (n, nbytes, nrows) in sorted(per.items(), key=lambda kv: (int(kv[0][0]),
                                                                                           kv[0][1], kv[0][2])):
            files.add_metric(label + [bucket, level, kind], n)
            size.add_metric(label + [bucket, level, kind], nbytes)
            rows.add_metric(label + [bucket, level, kind], nrows)
        yield from (files, size, rows)

        stats = self.table.stats
        retries = CounterMetricFamily("tidelake_table_commit_retries", "Commits retried at the next version "
                                      "after another writer took theirs (this process)", labels=["table"])
        retries.add_metric(label, stats.commit_retries)
        conflicts = CounterMetricFamily("tidelake_table_commit_conflicts", "Commits refused by the conflict "
                                        "table (this process)", labels=["table"])
        conflicts.add_metric(label, stats.commit_conflicts)
        yield from (retries, conflicts)
        runs = CounterMetricFamily("tidelake_table_maintenance_runs", "Compactions and clusterings that "
                                   "committed (this process)", labels=["table", "operation"])
        durations = HistogramMetricFamily("tidelake_table_maintenance_duration_seconds", "Time of a compaction or "
                                          "clustering that committed (this process)", labels=["table", "operation"])
        for operation in ("cluster", "compact"):
            h = stats.maintenance.get(operation)
            if h is None:
                runs.add_metric(label + [operation], 0)
                continue
            buckets = h.cumulative()
            runs.add_metric(label + [operation], buckets[-1][1])
            durations.add_metric(label + [operation], buckets, h.total)
        yield from (runs, durations)

