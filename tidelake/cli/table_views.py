"""``tidelake table publish`` (the read-optimized view in open formats) and ``tidelake table sql`` (DuckDB
over the Arrow scan of a version, and over an increment as the relation ``changes``)."""
from __future__ import annotations

import click

from tidelake.cli.errors import CliError, one_line
from tidelake.cli.table import (TypedTimestamp, _either_version_or_time, _limit, _open, _print_arrow, _print_json_lines,
                                limit_option, start_before_end, times_as_typed)
from tidelake.lakeview import FORMATS, LakeviewError, publish

TABLE_RELATION = "t"
CHANGES_RELATION = "changes"


@click.command("publish")
@click.argument("path")
@click.option("--format", "formats", type=click.Choice(FORMATS), multiple=True,
              help="delta and/or iceberg (repeatable; default: the table property view.formats)")
@click.option("--version", type=click.IntRange(min=0), default=None, help="publish this version (default: latest)")
def publish_command(path: str, formats: tuple[str, ...], version: int | None) -> None:
    """Publish the table's read-optimized view (Delta log at PATH/_delta_log, Iceberg metadata and a
    SQLite catalog under PATH/_lakeview/iceberg, the file list in PATH/_lakeview/view.json)."""
    try:
        done = publish(_open(path), formats or None, version)
    except LakeviewError as e:
        raise CliError(str(e)) from None
    what = ", ".join(done.formats) if done.formats else "nothing new"
    click.echo(f"published {what}: view of version {done.source_version}, {done.files} files "
               f"({done.merged} merged for the view)" + (f"; already current: {', '.join(done.skipped)}"
                                                          if done.skipped else ""))


def _relations(query: str) -> set[str] | None:
    """The relation names a query reads (None if DuckDB cannot tell without running it)."""
    import duckdb
    try:
        return {n.split(".")[-1].strip('"') for n in duckdb.get_table_names(query)}
    except duckdb.Error:
        return None


@click.command("sql")
@click.argument("path")
@click.argument("query")
@click.option("--version", type=click.IntRange(min=0), default=None, help="t is the table at this version")
@click.option("--timestamp", type=TypedTimestamp(), default=None, help="t is the table as of this time")
@click.option("--start-version", type=click.IntRange(min=-1), default=None,
              help="changes is the increment (start, end]")
@click.option("--end-version", type=click.IntRange(min=0), default=None, help="end of the increment (default latest)")
@click.option("--start-timestamp", type=TypedTimestamp(), default=None, help="changes by commit time (start, end]")
@click.option("--end-timestamp", type=TypedTimestamp(), default=None)
@limit_option
@click.option("--json", "as_json", is_flag=True, help="print JSON lines (one object per row)")
def sql_command(path: str, query: str, version: int | None, timestamp: int | None, start_version: int | None,
                end_version: int | None, start_timestamp: int | None, end_timestamp: int | None,
                limit: int | None, as_json: bool) -> None:
    """Run a DuckDB SQL QUERY over the table: ``t`` is the table (latest, --version or --timestamp),
    ``changes`` the increment (--start-version/--end-version or --start-timestamp/--end-timestamp) with
    _op, _commit_version and _commit_time."""
    import duckdb

    _either_version_or_time(version, timestamp)
    by_time = start_timestamp is not None or end_timestamp is not None
    if by_time and (start_version is not None or end_version is not None):
        raise click.UsageError("give --start/--end versions or timestamps, not both")
    start_before_end(start_version, end_version, "--start-version", "--end-version")
    start_before_end(start_timestamp, end_timestamp, "--start-timestamp", "--end-timestamp")
    t = _open(path)
    wanted = _relations(query)
    con = duckdb.connect()
    has_range = start_version is not None or start_timestamp is not None
    if wanted is not None and CHANGES_RELATION in wanted and not has_range:
        raise click.UsageError(f"the relation {CHANGES_RELATION} needs --start-version or --start-timestamp")
    with times_as_typed(("--timestamp", timestamp), ("--start-timestamp", start_timestamp),
                        ("--end-timestamp", end_timestamp)):
        if wanted is None or TABLE_RELATION in wanted:   # only what the query reads is scanned
            con.register(TABLE_RELATION, t.scan(version=version, timestamp=timestamp))
        if has_range and (wanted is None or CHANGES_RELATION in wanted):
            con.register(CHANGES_RELATION, t.changes(start_version=start_version, end_version=end_version,
                                                     start_timestamp=start_timestamp, end_timestamp=end_timestamp))
    try:
        out = con.sql(query)
        result = out.to_arrow_table() if out is not None else None
    except duckdb.Error as e:
        raise CliError(f"sql: {one_line(str(e))}") from None
    if result is None:
        return
    if as_json:
        _print_json_lines(result, limit)
    else:
        _print_arrow(result, "result", _limit(limit))
