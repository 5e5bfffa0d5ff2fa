"""`tidelake acls add|list|remove` — Kafka's kafka-acls.sh (confluent-kafka's AdminClient: CreateAcls,
DescribeAcls, DeleteAcls), against any broker with an authorizer."""
from __future__ import annotations

from typing import Callable

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows

OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS", "IDEMPOTENT_WRITE")


@click.group(cls=CommandGroup)
def acls() -> None:
    """Add, list and remove ACLs (Kafka's kafka-acls)."""


def _resource_options(f: Callable) -> Callable:
    for decorator in reversed([
        click.option("--topic", default=None, help="The topic (or prefix, with --resource-pattern-type prefixed)."),
        click.option("--group", default=None, help="The consumer group (or prefix)."),
        click.option("--transactional-id", default=None, help="The transactional id (or prefix)."),
        click.option("--cluster", is_flag=True, help="The cluster resource (kafka-cluster)."),
        click.option("--resource-pattern-type", type=click.Choice(["literal", "prefixed", "match", "any"],
                                                                   case_sensitive=False), default=None,
                     help="literal (default for add) or prefixed; list/remove also take match and any."),
    ]):
        f = decorator(f)
    return f


def _resource(topic, group, transactional_id, cluster, required: bool):
    """(ResourceType, name) of the one resource option given (ANY, None when none and not required)."""
    from confluent_kafka.admin import ResourceType
    given = [(ResourceType.TOPIC, topic), (ResourceType.GROUP, group),
             (ResourceType.TRANSACTIONAL_ID, transactional_id)]
    chosen = [(t, n) for t, n in given if n is not None] + ([(ResourceType.BROKER, "kafka-cluster")] if cluster else [])
    if len(chosen) > 1:
        raise click.UsageError("give one of --topic, --group, --transactional-id, --cluster")
    if not chosen:
        if required:
            raise click.UsageError("which resource? give --topic, --group, --transactional-id or --cluster")
        return ResourceType.ANY, None
    return chosen[0]


def _pattern(value: str | None, default: str):
    from confluent_kafka.admin import ResourcePatternType
    return ResourcePatternType[(value or default).upper()]


@acls.command()
@broker_options
@_resource_options
@click.option("--allow-principal", "allow", multiple=True, metavar="User:NAME", help="Principal to allow; repeatable.")
@click.option("--deny-principal", "deny", multiple=True, metavar="User:NAME", help="Principal to deny; repeatable.")
@click.option("--host", "hosts", multiple=True, default=("*",), show_default=True, help="Host; repeatable.")
@click.option("--operation", "operations", multiple=True, required=True,
              type=click.Choice(OPERATIONS, case_sensitive=False), help="Operation; repeatable.")
def add(conn: BrokerConnection, topic, group, transactional_id, cluster, resource_pattern_type, allow, deny, hosts,
        operations) -> None:
    """Add ACLs: each principal x host x operation on the resource."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType
    if not allow and not deny:
        raise click.UsageError("give --allow-principal or --deny-principal")
    if resource_pattern_type and resource_pattern_type.lower() not in ("literal", "prefixed"):
        raise click.UsageError("ACLs are added with --resource-pattern-type literal or prefixed")
    rtype, name = _resource(topic, group, transactional_id, cluster, required=True)
    pattern = _pattern(resource_pattern_type, "literal")
    bindings = [AclBinding(rtype, name, pattern, principal, host, AclOperation[op.upper()], perm)
                for perm, principals in ((AclPermissionType.ALLOW, allow), (AclPermissionType.DENY, deny))
                for principal in principals for host in hosts for op in operations]
    admin = conn.admin()
    for binding, future in admin.create_acls(bindings, request_timeout=conn.timeout).items():
        conn.wait(future, f"cannot add {_describe(binding)}")
        click.echo(f"Added {_describe(binding)}")


def _describe(b) -> str:
    return (f"{b.permission_type.name} {b.principal} from {b.host} {b.operation.name} on "
            f"{b.restype.name} {b.name} ({b.resource_pattern_type.name})")


def _filter(conn, topic, group, transactional_id, cluster, resource_pattern_type, principal):
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType
    rtype, name = _resource(topic, group, transactional_id, cluster, required=False)
    return AclBindingFilter(rtype, name, _pattern(resource_pattern_type, "any"), principal, None, AclOperation.ANY,
                            AclPermissionType.ANY)


@acls.command(name="list")
@broker_options
@_resource_options
@click.option("--principal", default=None, metavar="User:NAME", help="Only this principal's ACLs.")
@json_option
def list_acls(conn: BrokerConnection, topic, group, transactional_id, cluster, resource_pattern_type, principal,
              as_json: bool) -> None:
    """List ACLs (all, or those matching the resource and principal given)."""
    # kafka-python's DescribeAcls: it reports the response's error (librdkafka 2.x drops it and
    # answers an empty list, which would read as "no ACLs" to someone not allowed to see them)
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as PyResourceType
    from kafka.errors import KafkaError as PyKafkaError
    flt = _filter(conn, topic, group, transactional_id, cluster, resource_pattern_type, principal)
    kind = "CLUSTER" if flt.restype.name == "BROKER" else flt.restype.name
    admin = conn.kafka_python_admin()
    try:
        found, error = admin.describe_acls(ACLFilter(
            principal, None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(PyResourceType[kind], flt.name, ACLResourcePatternType[flt.resource_pattern_type.name])))
    except PyKafkaError as e:
        raise CliError(f"cannot list ACLs: {e.message}: {e.description}") from None
    finally:
        admin.close()
    if error.errno != 0:
        raise CliError(f"cannot list ACLs: {error.message}: {error.description}")
    rows = [{"resource_type": a.resource_pattern.resource_type.name, "name": a.resource_pattern.resource_name,
             "pattern_type": a.resource_pattern.pattern_type.name, "principal": a.principal, "host": a.host,
             "operation": a.operation.name, "permission": a.permission_type.name} for a in found]
    if as_json:
        print_json(rows)
        return
    headers = ("RESOURCE_TYPE", "NAME", "PATTERN_TYPE", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
    print_rows(headers, [[r[h.lower()] for h in headers] for r in rows])


@acls.command()
@broker_options
@_resource_options
@click.option("--principal", default=None, metavar="User:NAME", help="Only this principal's ACLs.")
def remove(conn: BrokerConnection, topic, group, transactional_id, cluster, resource_pattern_type, principal) -> None:
    """Remove the ACLs matching the resource (and principal) given."""
    if not any((topic, group, transactional_id, cluster, principal)):
        raise click.UsageError("say which ACLs: --topic, --group, --transactional-id, --cluster or --principal")
    flt = _filter(conn, topic, group, transactional_id, cluster, resource_pattern_type, principal)
    admin = conn.admin()
    removed = []
    for future in admin.delete_acls([flt], request_timeout=conn.timeout).values():
        removed.extend(conn.wait(future, "cannot remove ACLs"))
    if not removed:
        raise CliError("no ACL matched")
    for b in removed:
        click.echo(f"Removed {_describe(b)}")
