"""The ``tidelake`` command. Each concept adds its own command group in its own module; the root group
is the error boundary (see ``errors.py``): every failure is one line on stderr, ``--debug`` adds the trace."""
from __future__ import annotations

import click

from tidelake.cli.acls import acls
from tidelake.cli.broker import broker
from tidelake.cli.cluster import cluster
from tidelake.cli.configs import configs
from tidelake.cli.console import consume, produce
from tidelake.cli.errors import DEBUG, CommandGroup, quiet_library_logs
from tidelake.cli.groups import groups
from tidelake.cli.partitions import partitions
from tidelake.cli.pipeline import pipeline
from tidelake.cli.records import records
from tidelake.cli.schema_registry import schema_registry
from tidelake.cli.share_groups import share_groups
from tidelake.cli.table import table
from tidelake.cli.table_views import publish_command, sql_command
from tidelake.cli.topics import topics
from tidelake.cli.transactions import transactions
from tidelake.cli.users import users
from tidelake.cli.web_console import console


@click.group("tidelake", cls=CommandGroup)
@click.version_option(package_name="tidelake")
@click.option("--debug", is_flag=True, envvar="TIDELAKE_DEBUG",
              help="On failure print the full trace; show the Kafka client libraries' own log lines.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """tidelake: Kafka-compatible broker, PySpark pipeline, transactional table."""
    ctx.meta[DEBUG] = debug
    quiet_library_logs(debug)


for _command in (broker, cluster, topics, partitions, produce, consume, groups, share_groups, configs, records, transactions, acls, users, table,
                 pipeline, console, schema_registry):
    cli.add_command(_command)
for _command in (publish_command, sql_command):   # table subcommands kept in their own module
    table.add_command(_command)


def main() -> None:
    cli(prog_name="tidelake")


if __name__ == "__main__":
    main()
