"""``tidelake table ...``: create, inspect, change and maintain transactional tables, with Delta's and
Paimon's names (history, restore to a version or time, VACUUM-like expire with RETAIN / DRY RUN,
set-properties, add-column, update/delete with a predicate). PATH is a local directory or
``s3://bucket/prefix`` (endpoint, region and credentials from AWS's environment variables:
AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)."""
from __future__ import annotations

import json
from collections import Counter
from contextlib import contextmanager
from typing import Any, Iterator

import click
import pyarrow as pa

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.output import json_option, on_terminal, print_json, print_pairs, print_rows
from tidelake.cli.values import TimestampMs, format_ms, parse_pairs
from tidelake.clock import wall_ms
from tidelake.table import SchemaError, Table
from tidelake.table.errors import TimeExpired, TimeNotFound
from tidelake.table.properties import BUCKET_NUM, RETAIN_HOURS
from tidelake.table.schema import parse_schema, parse_type
from tidelake.table.summary import files_by_bucket, history_entry

OPS = (">=", "<=", "!=", "=", "<", ">")


def _value(text: str, field: pa.Field, option: str) -> Any:
    """A value typed by the user for ``field``, in the column's type (a usage error if it is not one)."""
    if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
        return text
    if text.lower() == "null":
        return None
    try:
        return pa.scalar(text).cast(field.type).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise click.BadParameter(f"{text!r} is not a {field.type} (column {field.name})", param_hint=option) \
            from None


def _parse_where(where: tuple[str, ...], schema: pa.Schema) -> list[tuple[str, str, Any]] | None:
    """``--where "id=5" --where "amount>=10"`` -> [(col, op, value)], values cast to column type."""
    out = []
    for w in where:
        for op in OPS:
            if op in w:
                col, val = (x.strip() for x in w.split(op, 1))
                if col not in schema.names:
                    raise click.BadParameter(f"no column {col!r} (columns: {', '.join(schema.names)})",
                                             param_hint="--where")
                out.append((col, op, _value(val, schema.field(col), "--where")))
                break
        else:
            raise click.BadParameter(f"cannot parse filter {w!r} (use col=value, col>=value, ...)",
                                     param_hint="--where")
    return out or None


def _columns(columns: str | None, schema: pa.Schema) -> list[str] | None:
    if columns is None:
        return None
    names = [c.strip() for c in columns.split(",") if c.strip()]
    unknown = [c for c in names if c not in schema.names]
    if unknown or not names:
        raise click.BadParameter(f"no column {', '.join(unknown) or '(empty)'} (columns: {', '.join(schema.names)})",
                                 param_hint="--columns")
    return names


def _sorted(rows: pa.Table, keys: list[str]) -> pa.Table:
    return rows.sort_by([(k, "ascending") for k in keys])


def _print_arrow(t: pa.Table, title: str, limit: int | None) -> None:
    shown = t if limit is None else t.slice(0, limit)
    note = f", first {limit}" if limit is not None and t.num_rows > limit else ""
    print_rows(t.column_names, [list(r.values()) for r in shown.to_pylist()], title=f"{title} ({t.num_rows} rows{note})")


def _print_json_lines(t: pa.Table, limit: int | None) -> None:
    for r in (t if limit is None else t.slice(0, limit)).to_pylist():
        click.echo(json.dumps(r, default=str))


def _open(path: str, clock=None) -> Table:
    # A command's process ends when it returns: automatic maintenance its commit makes due runs
    # inside the command (inline), not in a background thread the exit would cut short.
    return Table.open(path, clock=clock, maintenance="inline")


class TypedTime(int):
    """Milliseconds since the epoch that keep the text the user typed, so a message names the time as given."""
    text: str

    def __new__(cls, ms: int, text: str) -> "TypedTime":
        self = super().__new__(cls, ms)
        self.text = text
        return self


class TypedTimestamp(TimestampMs):
    """``TimestampMs`` whose value remembers what was typed (``TypedTime``)."""

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, TypedTime):
            return value
        return TypedTime(super().convert(value, param, ctx), str(value).strip())


@contextmanager
def times_as_typed(*options: tuple[str, int | None]) -> Iterator[None]:
    """A time the table cannot resolve (before its creation, or expired) is named by its option and as the
    user typed it, not as milliseconds since the epoch. ``options``: (option name, its TypedTime or None)."""
    try:
        yield
    except (TimeNotFound, TimeExpired) as e:
        for option, value in options:
            if isinstance(value, TypedTime) and value == e.timestamp_ms:
                raise CliError(f"{option} {value.text} {e.reason}") from None
        raise


def start_before_end(start: int | None, end: int | None, start_option: str, end_option: str) -> None:
    """An increment (start, end] given the wrong way round is a usage error, not an empty result."""
    if start is not None and end is not None and end < start:
        def shown(t: int) -> str:
            return t.text if isinstance(t, TypedTime) else str(t)
        raise click.UsageError(f"{end_option} {shown(end)} is before {start_option} {shown(start)} "
                               "(an increment is (start, end])")


def _either_version_or_time(version: int | None, timestamp: int | None) -> None:
    if version is not None and timestamp is not None:
        raise click.UsageError("give --version or --timestamp, not both")


limit_option = click.option("--limit", type=click.IntRange(min=1), default=None,
                            help="At most this many rows (default: all when not on a terminal, 50 on one).")


def _limit(limit: int | None) -> int | None:
    return limit if limit is not None else (50 if on_terminal() else None)


@click.group("table", cls=CommandGroup)
def table() -> None:
    """Transactional primary-key tables (time travel, incremental reads, compaction).

    PATH is a local directory or s3://bucket/prefix (S3 settings from AWS's environment variables:
    AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)."""


@table.command()
@click.argument("path")
@click.option("--schema", required=True, help='e.g. "id long, name string, amount long"')
@click.option("--primary-key", "-k", required=True, help="comma-separated key columns")
@click.option("--buckets", type=click.IntRange(min=1), default=None, help="write.bucket.num")
@click.option("--property", "-p", "props", multiple=True, metavar="KEY=VALUE",
              help="table property (repeatable; your own under user.)")
def create(path: str, schema: str, primary_key: str, buckets: int | None, props: tuple[str, ...]) -> None:
    """Create a table."""
    properties = parse_pairs(props, "--property")
    if buckets is not None:
        properties[BUCKET_NUM.name] = str(buckets)
    try:
        parsed = parse_schema(schema)
    except SchemaError as e:
        raise click.BadParameter(str(e), param_hint="--schema") from None
    t = Table.create(path, parsed, [k.strip() for k in primary_key.split(",")], properties)
    click.echo(f"created table {t.path} version {t.version}")


@table.command()
@click.argument("path")
@json_option
def describe(path: str, as_json: bool) -> None:
    """Schema, properties, version and files per bucket and level."""
    t = _open(path)
    files = files_by_bucket(t.plan())
    info = {"path": t.path, "version": t.version, "last_commit": format_ms(t.latest_timestamp()),
            "primary_key": t.primary_key, "schema": [{"name": f.name, "type": str(f.type)}
                                                                    for f in t.visible_schema_at()],
            "properties": dict(sorted(t.properties.items())), "files": files}
    if as_json:
        print_json(info)
        return
    print_pairs([("version", info["version"]), ("last commit", info["last_commit"]),
                 ("primary key", ", ".join(t.primary_key)),
                 ("schema", ", ".join(f"{f['name']} {f['type']}" for f in info["schema"]))]
                + list(info["properties"].items()), title=f"table {t.path}")
    print_rows(("BUCKET", "KIND", "LEVEL", "FILES", "ROWS", "BYTES"),
               [(f["bucket"], f["kind"], f["level"], f["files"], f["rows"], f["bytes"]) for f in files],
               title=f"live files at version {t.version}", right=("BUCKET", "LEVEL", "FILES", "ROWS", "BYTES"))


def _history_entry(e: dict) -> dict:
    """A log entry as DESCRIBE HISTORY shows it, with its time also as ISO-8601."""
    row = history_entry(e)
    return {"version": row["version"], "timestamp": format_ms(row["timestamp_ms"]), **row}


@table.command()
@click.argument("path")
@limit_option
@json_option
def history(path: str, limit: int | None, as_json: bool) -> None:
    """Retained versions, newest first (--json: with each operation's parameters and metrics)."""
    t = _open(path)
    entries = [_history_entry(e) for e in reversed(t.history())]
    entries = entries if limit is None else entries[:limit]
    if as_json:
        print_json(entries)
        return

    def summary(e: dict) -> str | None:
        p = e["parameters"]
        app = p.get("app")
        parts = [f"app={app['app_id']}#{app['batch_id']}" if app else None,
                 f"restore_of={p['restore_of']}" if "restore_of" in p else None,
                 f"schema=[{', '.join(p['schema_fields'])}]" if "schema_fields" in p and e["operation"] == "schema"
                 else None]
        return " ".join(x for x in parts if x) or None

    print_rows(("VERSION", "TIME (UTC)", "OPERATION", "READ-VERSION", "FILES+", "FILES-", "ROWS+", "PARAMETERS"),
               [(e["version"], e["timestamp"], e["operation"], e["read_version"], e["metrics"].get("files_added"),
                 e["metrics"].get("files_removed"), e["metrics"].get("rows_added"), summary(e))
                for e in entries],
               title=f"history of {t.path}", right=("VERSION", "READ-VERSION", "FILES+", "FILES-", "ROWS+"))


@table.command()
@click.argument("path")
@click.option("--version", "version", type=click.IntRange(min=0), default=None, help="time travel to a version")
@click.option("--timestamp", type=TypedTimestamp(), default=None, help="time travel to a time (ISO-8601 or epoch ms)")
@click.option("--where", multiple=True, help='filter, e.g. "id=5" (repeatable, ANDed)')
@click.option("--columns", default=None, help="comma-separated columns")
@limit_option
@click.option("--json", "as_json", is_flag=True, help="print JSON lines (one object per row) instead of a table")
def scan(path: str, version: int | None, timestamp: int | None, where: tuple[str, ...], columns: str | None,
         limit: int | None, as_json: bool) -> None:
    """Read the table (latest, or as of a version / time), ordered by the primary key."""
    _either_version_or_time(version, timestamp)
    t = _open(path)
    shown = t.visible_schema_at()   # (an aggregate sink's state columns are the pipeline's, never shown)
    wanted = _columns(columns, shown)
    # read the key too, so rows come out in key order whichever columns are shown
    read = None if wanted is None else wanted + [k for k in t.primary_key if k not in wanted]
    with times_as_typed(("--timestamp", timestamp)):
        out = t.scan(version=version, timestamp=timestamp, filter=_parse_where(where, shown), columns=read)
    out = _sorted(out, t.primary_key)
    out = out if wanted is None else out.select(wanted)
    if as_json:
        _print_json_lines(out, limit)
    else:
        at = f"version {version}" if version is not None else (
            f"as of {format_ms(timestamp)}" if timestamp is not None else f"version {t.version}")
        _print_arrow(out, at, _limit(limit))


@table.command()
@click.argument("path")
@click.option("--start-version", type=click.IntRange(min=-1), default=None)
@click.option("--end-version", type=click.IntRange(min=0), default=None)
@click.option("--start-timestamp", type=TypedTimestamp(), default=None, help="ISO-8601 or epoch ms")
@click.option("--end-timestamp", type=TypedTimestamp(), default=None, help="ISO-8601 or epoch ms")
@limit_option
@click.option("--json", "as_json", is_flag=True, help="print JSON lines (one object per change)")
def changes(path: str, start_version: int | None, end_version: int | None, start_timestamp: int | None,
            end_timestamp: int | None, limit: int | None, as_json: bool) -> None:
    """Incremental read over (start, end]."""
    by_time = start_timestamp is not None or end_timestamp is not None
    if by_time and (start_version is not None or end_version is not None):
        raise click.UsageError("give versions or timestamps, not both")
    if end_timestamp is not None and start_timestamp is None:
        raise click.UsageError("--end-timestamp needs --start-timestamp")
    start_before_end(start_version, end_version, "--start-version", "--end-version")
    start_before_end(start_timestamp, end_timestamp, "--start-timestamp", "--end-timestamp")
    t = _open(path)
    if by_time:
        with times_as_typed(("--start-timestamp", start_timestamp), ("--end-timestamp", end_timestamp)):
            out = t.changes(start_timestamp=start_timestamp, end_timestamp=end_timestamp)
    else:
        out = t.changes(start_version=start_version if start_version is not None else -1, end_version=end_version)
    if as_json:
        _print_json_lines(out, limit)
    else:
        _print_arrow(out, "changes", _limit(limit))


def _maintenance(name: str, result) -> None:
    click.echo(f"{name}: " + ("nothing to do" if result is None else f"committed version {result}"
                              if isinstance(result, int) else " ".join(f"{k}={v}" for k, v in result.items())))


@table.command()
@click.argument("path")
def compact(path: str) -> None:
    """Merge base + deltas into new base files (per bucket, in parallel)."""
    from tidelake.cli.progress import ProgressBar
    t = _open(path)
    with ProgressBar("compacting buckets", 0, unit="buckets") as bar:
        version = t.compact(progress=lambda done, total: bar.update(done, total))
    _maintenance("compact", version)


@table.command()
@click.argument("path")
def cluster(path: str) -> None:
    """Merge small delta files (L0 -> L1 -> L2)."""
    _maintenance("cluster", _open(path).cluster())


@table.command()
@click.argument("path")
@click.argument("version", type=click.IntRange(min=0), required=False)
@click.option("--timestamp", type=TypedTimestamp(), default=None,
              help="Restore the version current at this time (ISO-8601 or epoch ms) instead of VERSION.")
def restore(path: str, version: int | None, timestamp: int | None) -> None:
    """Restore the table to a retained VERSION (or the one current at --timestamp), as a new version."""
    if (version is None) == (timestamp is None):
        raise click.UsageError("give VERSION or --timestamp (one of them)")
    t = _open(path)
    with times_as_typed(("--timestamp", timestamp)):
        target = version if version is not None else t.version_at(timestamp)
    if target == t.version:
        raise CliError(f"version {target} is the current version of {t.path}: nothing to restore")
    click.echo(f"restore to version {target}: committed version {t.restore(target)}")


def _retained(path: str, retain_hours: float | None) -> Table:
    """The table as expire sees it with ``retain_hours`` instead of acid.data.retain.hours: expiry compares
    commit and file times with now minus the retention, so a clock shifted by the difference gives the same
    cut-off as a retention of ``retain_hours``."""
    t = _open(path)
    if retain_hours is None:
        return t
    shift = int((RETAIN_HOURS.of(t.properties) - retain_hours) * 3_600_000)
    return _open(path, clock=lambda: wall_ms() + shift)


def _expire_plan(t: Table, retain_hours: float) -> dict:
    """What expire would remove: the versions before the new horizon (the version current at now minus
    the retention; the latest always stays) and the data files no retained version reads, once older
    than the retention."""
    entries = t.history()
    limit = wall_ms() - int(retain_hours * 3_600_000)
    horizon = min(max([e["version"] for e in entries if e["timestamp_ms"] <= limit] + [entries[0]["version"]]),
                  t.version)
    live = {f.path for v in range(horizon, t.version + 1) for f in t.plan(version=v)}
    files = [f.path for f in t.storage.list_info("data") if f.path not in live and f.modified_ms < limit]
    return {"horizon": horizon, "versions_removed": [e["version"] for e in entries if e["version"] < horizon],
            "files_removed": sorted(files)}


@table.command()
@click.argument("path")
@click.option("--retain", "retain_hours", type=click.FloatRange(min=0), default=None, metavar="HOURS",
              help="Keep this many hours of history (default: the table's acid.data.retain.hours).")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@json_option
def expire(path: str, retain_hours: float | None, dry_run: bool, as_json: bool) -> None:
    """Delete history older than the retention (VACUUM ... RETAIN HOURS [DRY RUN]): versions before the
    horizon and the data files only they read."""
    t = _retained(path, retain_hours)
    hours = retain_hours if retain_hours is not None else RETAIN_HOURS.of(t.properties)
    if dry_run:
        plan = _expire_plan(t, hours)
        if as_json:
            print_json({"dry_run": True, "retain_hours": hours, **plan})
            return
        click.echo(f"dry run (retain {hours:g} h): oldest readable version would be {plan['horizon']}; "
                   f"{len(plan['versions_removed'])} versions and {len(plan['files_removed'])} files would be removed")
        for f in plan["files_removed"]:
            click.echo(f)
        return
    result = t.expire()
    if as_json:
        print_json({"dry_run": False, "retain_hours": hours, **result})
    else:
        _maintenance("expire", result)


@table.command()
@click.argument("path")
@click.confirmation_option(prompt="Drop all history (only the latest version stays readable)?")
def purge(path: str) -> None:
    """Delete all history; only the latest version stays readable."""
    _maintenance("purge", _open(path).purge())


@table.command("set-properties")
@click.argument("path")
@click.argument("properties", nargs=-1, required=True, metavar="KEY=VALUE...")
def set_properties(path: str, properties: tuple[str, ...]) -> None:
    """Set table properties (ALTER TABLE SET TBLPROPERTIES) in one new version. Each value is checked
    first (type, range, allowed words); a name tidelake does not know is refused unless it starts with
    user. (a property of your own)."""
    t = _open(path)
    wanted = parse_pairs(properties, "KEY=VALUE")
    unchanged = [k for k, v in wanted.items() if t.properties.get(k) == v]
    if len(unchanged) == len(wanted):
        raise CliError(f"{', '.join(unchanged)} already set to these values on {t.path}: nothing to change")
    click.echo(f"set {', '.join(f'{k}={v}' for k, v in wanted.items())}: committed version {t.set_properties(wanted)}")


@table.command("add-column")
@click.argument("path")
@click.argument("name")
@click.argument("type_name", metavar="TYPE")
def add_column(path: str, name: str, type_name: str) -> None:
    """Add a nullable column NAME of TYPE (e.g. long, string, decimal(10,2)); older rows read it as null."""
    try:
        dtype = parse_type(type_name)
    except SchemaError as e:
        raise click.BadParameter(str(e), param_hint="TYPE") from None
    t = _open(path)
    click.echo(f"added column {name} {dtype}: committed version {t.add_column(name, dtype)}")


def _matching(t: Table, where: tuple[str, ...]) -> tuple[list, int]:
    if not where:
        raise click.UsageError("--where is required (e.g. --where id=5); it selects the rows")
    predicate = _parse_where(where, t.schema)
    n = t.scan(filter=predicate, columns=t.primary_key).num_rows
    if n == 0:
        raise CliError(f"no row of {t.path} matches {' AND '.join(where)}: nothing to change")
    return predicate, n


@table.command()
@click.argument("path")
@click.option("--set", "assignments", multiple=True, required=True, metavar="COLUMN=VALUE",
              help="New value of a (non-key) column; repeatable.")
@click.option("--where", multiple=True, help='rows to update, e.g. "id=5" (repeatable, ANDed)')
def update(path: str, assignments: tuple[str, ...], where: tuple[str, ...]) -> None:
    """UPDATE ... SET column=value WHERE ...: one new version."""
    t = _open(path)
    values = {}
    for col, text in parse_pairs(assignments, "--set").items():
        if col not in t.schema.names:
            raise click.BadParameter(f"no column {col!r}", param_hint="--set")
        if col in t.primary_key:
            raise click.BadParameter(f"{col} is a primary key column and cannot be updated", param_hint="--set")
        values[col] = _value(text, t.schema.field(col), "--set")
    predicate, n = _matching(t, where)
    click.echo(f"updated {n} rows: committed version {t.update(where=predicate, set=values)}")


@table.command()
@click.argument("path")
@click.option("--where", multiple=True, help='rows to delete, e.g. "id=5" (repeatable, ANDed)')
def delete(path: str, where: tuple[str, ...]) -> None:
    """DELETE ... WHERE ...: one new version."""
    t = _open(path)
    predicate, n = _matching(t, where)
    click.echo(f"deleted {n} rows: committed version {t.delete(where=predicate)}")


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
    with t.transaction() as tx:
        (tx.delete if is_delete else tx.upsert)(data)
    click.echo(f"{'deleted' if is_delete else 'upserted'} {data.num_rows} rows: version {tx.version}")


@table.command()
@click.argument("path")
@click.option("--repair", is_flag=True, help="Perform the safe repairs (rebuild checkpoints, fix the pointer); "
              "each problem says whether --repair can mend it.")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
def check(path: str, repair: bool, as_json: bool) -> None:
    """Verify a table: log continuity, entries, checkpoints and every referenced data file (every page
    decoded and its checksum verified).

    Exits 1 when a problem remains. --repair performs only repairs that lose nothing (checkpoints, the
    checkpoint pointer); a lost or damaged log entry or data file cannot be mended from what is left and
    is reported with what to do, never papered over."""
    from tidelake.storage import open_storage
    from tidelake.table.check import check_table
    from tidelake.table.log import LOG_DIR
    storage = open_storage(path)
    if not storage.list(LOG_DIR) and not storage.list("data"):
        raise CliError(f"no tidelake table at {path}")
    report = check_table(storage, repair=repair)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        for line in report.repaired:
            click.echo(f"repaired: {line}")
        for p in report.problems:
            can = "--repair will" if p.repairable else "--repair cannot mend this"
            click.echo(f"problem: {p.path}: {p.problem} -> {can}: {p.repair}")
        version = "unreadable" if report.version is None else f"version {report.version}"
        click.echo(f"{'ok' if report.ok else 'damaged'}: {path} ({version}, {report.entries} log entries, "
                   f"{report.checkpoints} checkpoints, {report.data_files} data files checked)")
    if not report.ok:
        raise SystemExit(1)
