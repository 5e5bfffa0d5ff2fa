"""``tidelake table ...``: create, inspect and maintain transactional tables."""
from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from typing import Any

import click
import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

from tidelake.table import Table, TableError
from tidelake.table.schema import parse_schema

console = Console()


def _ts(ms: int | None) -> str:
    if ms is None:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _parse_time(s: str | None) -> int | None:
    """Milliseconds since the epoch, or an ISO-8601 date/time (UTC if no zone)."""
    if s is None:
        return None
    if s.lstrip("-").isdigit():
        return int(s)
    d = dt.datetime.fromisoformat(s)
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.timezone.utc)
    return int(d.timestamp() * 1000)


def _parse_where(where: tuple[str, ...], schema: pa.Schema) -> list[tuple[str, str, Any]] | None:
    """``--where "id=5" --where "amount>=10"`` -> [(col, op, value)], values cast to column type."""
    out = []
    for w in where:
        for op in (">=", "<=", "!=", "=", "<", ">"):
            if op in w:
                col, val = (x.strip() for x in w.split(op, 1))
                if col not in schema.names:
                    raise click.BadParameter(f"no column {col!r}")
                value = pa.scalar(val).cast(schema.field(col).type).as_py() if not pa.types.is_string(schema.field(col).type) else val
                out.append((col, op, value))
                break
        else:
            raise click.BadParameter(f"cannot parse filter {w!r} (use col=value, col>=value, ...)")
    return out or None


def _print_arrow(t: pa.Table, title: str, limit: int) -> None:
    rt = RichTable(title=f"{title} ({t.num_rows} rows{', first ' + str(limit) if t.num_rows > limit else ''})")
    for name in t.column_names:
        rt.add_column(name, overflow="fold")
    for row in t.slice(0, limit).to_pylist():
        rt.add_row(*["" if v is None else str(v) for v in row.values()])
    console.print(rt)


def _open(path: str) -> Table:
    try:
        return Table.open(path)
    except TableError as e:
        raise click.ClickException(str(e)) from None


@click.group("table")
def table() -> None:
    """Transactional primary-key tables (time travel, incremental reads, compaction)."""


@table.command()
@click.argument("path")
@click.option("--schema", required=True, help='e.g. "id long, name string, amount long"')
@click.option("--primary-key", "-k", required=True, help="comma-separated key columns")
@click.option("--buckets", type=int, default=None, help="write.bucket.num")
@click.option("--property", "-p", "props", multiple=True, help="key=value table property (repeatable)")
def create(path: str, schema: str, primary_key: str, buckets: int | None, props: tuple[str, ...]) -> None:
    """Create a table."""
    properties = dict(p.split("=", 1) for p in props)
    if buckets is not None:
        properties["write.bucket.num"] = str(buckets)
    try:
        t = Table.create(path, parse_schema(schema), [k.strip() for k in primary_key.split(",")], properties)
    except TableError as e:
        raise click.ClickException(str(e)) from None
    console.print(f"created table [bold]{t.path}[/] version {t.version}")


@table.command()
@click.argument("path")
def describe(path: str) -> None:
    """Schema, properties, version and files per bucket and level."""
    t = _open(path)
    info = RichTable(title=f"table {t.path}", show_header=False)
    info.add_row("version", str(t.version))
    info.add_row("last commit", _ts(t.latest_timestamp()))
    info.add_row("primary key", ", ".join(t.primary_key))
    info.add_row("schema", ", ".join(f"{f.name} {f.type}" for f in t.schema))
    for k, v in sorted(t.properties.items()):
        info.add_row(k, v)
    console.print(info)
    plan = t.plan()
    counts: Counter = Counter()
    rows: Counter = Counter()
    size: Counter = Counter()
    for f in plan:
        key = (f.bucket, f.kind, f.level)
        counts[key] += 1
        rows[key] += f.rows
        size[key] += f.bytes
    ft = RichTable(title=f"live files at version {t.version}")
    for c in ("bucket", "kind", "level", "files", "rows", "bytes"):
        ft.add_column(c, justify="right" if c not in ("kind",) else "left")
    for key in sorted(counts):
        ft.add_row(str(key[0]), key[1], str(key[2]) if key[1] == "delta" else "", str(counts[key]), str(rows[key]), str(size[key]))
    console.print(ft)


@table.command()
@click.argument("path")
@click.option("--limit", type=int, default=50)
def history(path: str, limit: int) -> None:
    """Retained versions, newest first."""
    t = _open(path)
    h = t.history()
    rt = RichTable(title=f"history of {t.path}")
    for c in ("version", "time (UTC)", "operation", "read version", "files +", "files -", "rows +", "app"):
        rt.add_column(c)
    for e in reversed(h[-limit:]):
        app = e.get("app")
        rt.add_row(str(e["version"]), _ts(e["timestamp_ms"]), e["operation"], str(e.get("read_version", "")),
                   str(e["added"]), str(e["removed"]), str(e.get("rows_added", "")),
                   f"{app['app_id']}#{app['batch_id']}" if app else "")
    console.print(rt)


@table.command()
@click.argument("path")
@click.option("--version", "version", type=int, default=None, help="time travel to a version")
@click.option("--timestamp", default=None, help="time travel to a time (ms or ISO-8601)")
@click.option("--where", multiple=True, help='filter, e.g. "id=5" (repeatable, ANDed)')
@click.option("--columns", default=None, help="comma-separated columns")
@click.option("--limit", type=int, default=20)
@click.option("--json", "as_json", is_flag=True, help="print JSON lines instead of a table")
def scan(path: str, version: int | None, timestamp: str | None, where: tuple[str, ...], columns: str | None,
         limit: int, as_json: bool) -> None:
    """Read the table (latest, or as of a version / time)."""
    t = _open(path)
    try:
        out = t.scan(version=version, timestamp=_parse_time(timestamp), filter=_parse_where(where, t.schema),
                     columns=columns.split(",") if columns else None)
    except TableError as e:
        raise click.ClickException(str(e)) from None
    out = out.sort_by([(k, "ascending") for k in t.primary_key if k in out.column_names])
    if as_json:
        for r in out.slice(0, limit).to_pylist():
            click.echo(json.dumps(r, default=str))
    else:
        _print_arrow(out, f"version {version if version is not None else t.version}", limit)


@table.command()
@click.argument("path")
@click.option("--start-version", type=int, default=None)
@click.option("--end-version", type=int, default=None)
@click.option("--start-timestamp", default=None, help="ms or ISO-8601")
@click.option("--end-timestamp", default=None, help="ms or ISO-8601")
@click.option("--limit", type=int, default=50)
@click.option("--json", "as_json", is_flag=True)
def changes(path: str, start_version: int | None, end_version: int | None, start_timestamp: str | None,
            end_timestamp: str | None, limit: int, as_json: bool) -> None:
    """Incremental read over (start, end]."""
    t = _open(path)
    try:
        if start_timestamp is not None:
            out = t.changes(start_timestamp=_parse_time(start_timestamp), end_timestamp=_parse_time(end_timestamp))
        else:
            out = t.changes(start_version=start_version if start_version is not None else -1, end_version=end_version)
    except TableError as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        for r in out.slice(0, limit).to_pylist():
            click.echo(json.dumps(r, default=str))
    else:
        _print_arrow(out, "changes", limit)


def _maintenance(name: str, fn) -> None:
    try:
        v = fn()
    except TableError as e:
        raise click.ClickException(str(e)) from None
    console.print(f"{name}: " + ("nothing to do" if v is None else f"committed version {v}" if isinstance(v, int) else str(v)))


@table.command()
@click.argument("path")
def compact(path: str) -> None:
    """Merge base + deltas into new base files (per bucket, in parallel)."""
    t = _open(path)
    _maintenance("compact", t.compact)


@table.command()
@click.argument("path")
def cluster(path: str) -> None:
    """Merge small delta files (L0 -> L1 -> L2)."""
    t = _open(path)
    _maintenance("cluster", t.cluster)


@table.command()
@click.argument("path")
@click.argument("version", type=int)
def restore(path: str, version: int) -> None:
    """Restore the table to a retained version (as a new version)."""
    t = _open(path)
    _maintenance("restore", lambda: t.restore(version))


@table.command()
@click.argument("path")
def expire(path: str) -> None:
    """Delete history older than acid.data.retain.hours."""
    t = _open(path)
    _maintenance("expire", t.expire)


@table.command()
@click.argument("path")
@click.confirmation_option(prompt="Drop all history (only the latest version stays readable)?")
def purge(path: str) -> None:
    """Delete all history; only the latest version stays readable."""
    t = _open(path)
    _maintenance("purge", t.purge)


@table.command()
@click.argument("path")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--delete", "is_delete", is_flag=True, help="delete the keys in FILE instead")
def upsert(path: str, file: str, is_delete: bool) -> None:
    """Upsert (or delete) the rows of a Parquet, CSV or JSON-lines FILE in one commit."""
    t = _open(path)
    if file.endswith(".parquet"):
        import pyarrow.parquet as pq
        data = pq.read_table(file)
    elif file.endswith(".csv"):
        import pyarrow.csv as pcsv
        data = pcsv.read_csv(file)
    else:
        import pyarrow.json as pjson
        data = pjson.read_json(file)
    try:
        with t.transaction() as tx:
            (tx.delete if is_delete else tx.upsert)(data)
    except TableError as e:
        raise click.ClickException(str(e)) from None
    console.print(f"{'deleted' if is_delete else 'upserted'} {data.num_rows} rows: version {tx.version}")
