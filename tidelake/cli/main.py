"""The ``tidelake`` command. Each concept adds its own command group in its own module."""
from __future__ import annotations

import importlib

import click

# (module, attribute) of each command group; a module that is missing is simply not offered.
_GROUPS = [
    ("tidelake.cli.broker", "broker"),
    ("tidelake.cli.topics", "topics"),
    ("tidelake.cli.console", "produce"),
    ("tidelake.cli.console", "consume"),
    ("tidelake.cli.groups", "groups"),
    ("tidelake.cli.transactions", "transactions"),
    ("tidelake.cli.table", "table"),
    ("tidelake.cli.pipeline", "pipeline"),
]


@click.group()
@click.version_option(package_name="tidelake")
def cli() -> None:
    """tidelake: Kafka-compatible broker, PySpark pipeline, transactional table."""


for _mod, _attr in _GROUPS:
    try:
        cli.add_command(getattr(importlib.import_module(_mod), _attr))
    except ModuleNotFoundError as e:
        if e.name != _mod:
            raise


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
