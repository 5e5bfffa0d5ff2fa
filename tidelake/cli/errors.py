"""The CLI's error boundary: every failure becomes one line on stderr, ``tidelake: error: <message>``.

Expected failures (a table error, a Kafka error, a file that cannot be read, a malformed YAML or value
typed by the user, a broker that does not answer) say what went wrong and where; anything else is reported
the same way with its exception type and a pointer to ``--debug``, which prints the full trace first.
Usage errors exit 2, everything else 1 (the convention of click and of Kafka's tools).
"""
from __future__ import annotations

import logging
import traceback

import click

PROG = "tidelake"
# keys of the context's shared meta dict: the --debug flag, and the path of the command being run
DEBUG = "tidelake.debug"
_WHERE = "tidelake.command_path"


class CliError(click.ClickException):
    """An expected failure of a command, reported as one line, exit code 1."""


def one_line(text: str) -> str:
    """Multi-line messages (pyarrow's, YAML's) folded into one line."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def describe(exc: BaseException) -> str:
    """The message for an exception raised by a command."""
    import yaml
    from confluent_kafka import KafkaError, KafkaException
    from kafka.errors import KafkaError as KafkaPythonError

    from tidelake.errors import KafkaApiError
    from tidelake.table import TableError

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err = exc.args[0]
        return f"{err.name()}: {err.str()}"
    if isinstance(exc, KafkaPythonError):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (TableError, KafkaApiError)):
        return str(exc)
    if isinstance(exc, yaml.YAMLError):
        return f"malformed YAML: {exc}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or exc}: {exc.filename}"
    if isinstance(exc, (OSError, ValueError, TimeoutError)):
        return f"{exc}" or type(exc).__name__
    return f"{type(exc).__name__}: {exc} (unexpected; run with --debug for the trace)"


def report(exc: BaseException) -> int:
    """Print one line for ``exc`` and return the exit code."""
    if isinstance(exc, click.exceptions.Exit):
        return exc.exit_code
    if isinstance(exc, click.Abort):
        click.echo(f"{PROG}: aborted", err=True)
        return 1
    if isinstance(exc, KeyboardInterrupt):
        return 130
    if isinstance(exc, click.UsageError):
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"{PROG}: error: {one_line(exc.format_message())}{where}", err=True)
        return exc.exit_code
    if isinstance(exc, click.ClickException):
        click.echo(f"{PROG}: error: {one_line(exc.format_message())}", err=True)
        return exc.exit_code
    click.echo(f"{PROG}: error: {one_line(describe(exc))}", err=True)
    return 1


def quiet_library_logs(debug: bool) -> None:
    """Without --debug, client libraries' own log records (kafka-python's connection warnings, py4j's,
    kazoo's ZooKeeper connection retries) would add lines around the one error line: keep them to CRITICAL."""
    for name in ("kafka", "py4j", "kazoo"):
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.CRITICAL)


class CommandGroup(click.Group):
    """A click group behind the error boundary: every group of the ``tidelake`` command uses it.

    Resolving a subcommand records the full command path in the context's shared ``meta`` so that the
    one error line can say where it happened; the root group's ``main`` turns whatever escapes a command
    into that line and an exit code (``--debug``: the trace first).
    """

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:
            ctx.meta[_WHERE] = f"{ctx.command_path} {cmd.name}"
        return name, cmd, rest

    def invoke(self, ctx: click.Context):
        if ctx.parent is not None:
            return super().invoke(ctx)
        try:
            return super().invoke(ctx)
        # click's own handling: usage errors, and a reader of our output that went away (`| head`: exit 1
        # quietly)
        except (click.exceptions.Exit, click.Abort, click.UsageError, KeyboardInterrupt, BrokenPipeError):
            raise
        except Exception as e:
            if ctx.meta.get(DEBUG):
                traceback.print_exception(e)
            where = ctx.meta.get(_WHERE, ctx.command_path)
            message = e.format_message() if isinstance(e, click.ClickException) else describe(e)
            raise CliError(f"{one_line(message)} ({where})") from e

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as e:  # `tidelake topics`: the group's help
            click.echo(e.ctx.get_help())
            rv = 0
        except (Exception, KeyboardInterrupt) as e:
            rv = report(e)
        raise SystemExit(rv if isinstance(rv, int) else 0)
