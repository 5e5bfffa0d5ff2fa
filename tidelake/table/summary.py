"""A table as ``tidelake table describe`` / ``history`` and the web console show it: the live files grouped by
bucket, kind and level, and a history row split into the operation's parameters and metrics."""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from .files import FilePlan

# history row keys that are metrics (renamed as Delta's DESCRIBE HISTORY names them) or the row's identity
HISTORY_METRICS = {"added": "files_added", "removed": "files_removed", "rows_added": "rows_added"}
HISTORY_FIELDS = ("version", "timestamp_ms", "operation", "read_version")


def files_by_bucket(plans: Iterable[FilePlan]) -> list[dict[str, Any]]:
    """Files, rows and bytes per (bucket, kind, level), in bucket order (base before delta, levels up);
    ``level`` is None for base files."""
    counts: Counter = Counter()
    rows: Counter = Counter()
    size: Counter = Counter()
    for f in plans:
        key = (f.bucket, f.kind, f.level if f.kind == "delta" else None)
        counts[key] += 1
        rows[key] += f.rows
        size[key] += f.bytes
    return [{"bucket": k[0], "kind": k[1], "level": k[2], "files": counts[k], "rows": rows[k], "bytes": size[k]}
            for k in sorted(counts, key=lambda k: (k[0], k[1], -1 if k[2] is None else k[2]))]


def history_entry(e: Mapping[str, Any]) -> dict[str, Any]:
    """A ``Table.history()`` row as DESCRIBE HISTORY shows it: what, when, the operation's parameters and
    metrics."""
    return {"version": e["version"], "timestamp_ms": e["timestamp_ms"], "operation": e["operation"],
            "read_version": e.get("read_version"),
            "parameters": {k: v for k, v in e.items() if k not in HISTORY_FIELDS and k not in HISTORY_METRICS},
            "metrics": {name: e[k] for k, name in HISTORY_METRICS.items() if k in e}}
