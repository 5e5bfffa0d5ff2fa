"""How listing commands print: a rich table on a terminal; plain, untruncated, space-aligned columns when
stdout is a pipe or a file (so ``grep``/``awk`` see every character); one JSON document with ``--json``."""
from __future__ import annotations

import json
import sys
from typing import Any, Callable, Iterable, Sequence

import click


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of a table.")(f)


def on_terminal() -> bool:
    return sys.stdout.isatty()


def print_json(doc: Any) -> None:
    click.echo(json.dumps(doc, default=str))


def cell(value: Any) -> str:
    return "-" if value is None else str(value)


def print_rows(headers: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None,
               right: Sequence[str] = ()) -> None:
    """One table: ``headers`` and ``rows`` of cells (None prints as '-'); ``right``: headers to right-align."""
    rows = [[cell(v) for v in r] for r in rows]
    if on_terminal():
        from rich.console import Console
        from rich.table import Table
        table = Table(title=title, title_justify="left", header_style="bold")
        for h in headers:
            table.add_column(h, justify="right" if h in right else "left", overflow="fold")
        for r in rows:
            table.add_row(*r)
        Console(highlight=False).print(table)
        return
    if title:
        click.echo(title)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for r in [list(headers)] + rows:
        click.echo("  ".join(v.rjust(w) if h in right else v.ljust(w)
                             for v, w, h in zip(r, widths, headers)).rstrip())


def print_pairs(pairs: Iterable[tuple[str, Any]], title: str | None = None) -> None:
    """Name/value lines (a description of one thing)."""
    print_rows(("NAME", "VALUE"), pairs, title)
