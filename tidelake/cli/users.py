"""`tidelake users add|list|remove` — the SCRAM part of Kafka's kafka-configs.sh (KIP-554:
AlterUserScramCredentials, DescribeUserScramCredentials). The password is salted and hashed by the
client; the broker stores only the salted, iterated credential."""
from __future__ import annotations

import click

from tidelake.cli.errors import CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@click.group(cls=CommandGroup)
def users() -> None:
    """Add, list and remove SCRAM users."""


def _mechanism(name: str):
    from confluent_kafka.admin import ScramMechanism
    return ScramMechanism[name.upper().replace("-", "_")]


@users.command()
@broker_options
@click.argument("name")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True, envvar="TIDELAKE_USER_PASSWORD",
              help="The password (prompted when not given; env TIDELAKE_USER_PASSWORD).")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(MECHANISMS, case_sensitive=False),
              help="SCRAM mechanism; repeatable  [default: both]")
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True)
def add(conn: BrokerConnection, name: str, password: str, mechanisms: tuple[str, ...], iterations: int) -> None:
    """Add user NAME (or change its password)."""
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion
    admin = conn.admin()
    changes = [UserScramCredentialUpsertion(name, ScramCredentialInfo(_mechanism(m), iterations), password.encode())
               for m in (mechanisms or MECHANISMS)]
    for future in admin.alter_user_scram_credentials(changes, request_timeout=conn.timeout).values():
        conn.wait(future, f"cannot add user {name}")
    click.echo(f"User {name}: {', '.join(m.upper() for m in (mechanisms or MECHANISMS))} credentials set.")


@users.command(name="list")
@broker_options
@json_option
def list_users(conn: BrokerConnection, as_json: bool) -> None:
    """List SCRAM users and their mechanisms."""
    admin = conn.admin()
    described = conn.wait(admin.describe_user_scram_credentials(request_timeout=conn.timeout), "cannot list users")
    rows = [{"user": user, "mechanism": info.mechanism.name.replace("_", "-"), "iterations": info.iterations}
            for user, desc in sorted(described.items()) for info in desc.scram_credential_infos]
    if as_json:
        print_json(rows)
        return
    print_rows(("USER", "MECHANISM", "ITERATIONS"), [[r["user"], r["mechanism"], r["iterations"]] for r in rows],
               right=("ITERATIONS",))


@users.command()
@broker_options
@click.argument("name")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(MECHANISMS, case_sensitive=False),
              help="Remove only this mechanism's credential; repeatable  [default: every one the user has]")
def remove(conn: BrokerConnection, name: str, mechanisms: tuple[str, ...]) -> None:
    """Remove user NAME's SCRAM credentials."""
    from confluent_kafka.admin import UserScramCredentialDeletion
    admin = conn.admin()
    if not mechanisms:
        described = conn.wait(admin.describe_user_scram_credentials([name], request_timeout=conn.timeout)[name],
                              f"cannot remove user {name}")
        mechanisms = tuple(i.mechanism.name.replace("_", "-") for i in described.scram_credential_infos)
    deletions = [UserScramCredentialDeletion(name, _mechanism(m)) for m in mechanisms]
    for future in admin.alter_user_scram_credentials(deletions, request_timeout=conn.timeout).values():
        conn.wait(future, f"cannot remove user {name}")
    click.echo(f"User {name}: {', '.join(m.upper() for m in mechanisms)} credentials removed.")
