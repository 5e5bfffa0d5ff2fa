"""Kafka's ACL model: resource patterns, entries, bindings and the filters that select them, with
the protocol's numeric codes (``AclOperation``, ``AclPermissionType``, ``ResourceType``,
``PatternType``)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from tidelake.security.principal import parse_principal


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource name
WILDCARD = "*"

# What each resource type can be asked for (Kafka's AclEntry.supportedOperations; KIP-430 bit sets)
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
    ResourceType.USER: (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS),
}

# An ALLOW of any of these grants the key too (Kafka: READ/WRITE/DELETE/ALTER imply DESCRIBE,
# ALTER_CONFIGS implies DESCRIBE_CONFIGS); DENY is never widened.
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER, Operation.ALL}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.ALL}),
}


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True)
class AclEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry

    def to_json(self) -> dict:
        p, e = self.pattern, self.entry
        return {"resource_type": p.resource_type.name, "name": p.name, "pattern_type": p.pattern_type.name,
                "principal": e.principal, "host": e.host, "operation": e.operation.name,
                "permission": e.permission.name}

    @classmethod
    def from_json(cls, d: dict) -> AclBinding:
        return cls(ResourcePattern(ResourceType[d["resource_type"]], d["name"], PatternType[d["pattern_type"]]),
                   AclEntry(d["principal"], d["host"], Operation[d["operation"]], Permission[d["permission"]]))


def _enum(cls, value: int):
    try:
        return cls(value)
    except ValueError:
        return cls.UNKNOWN


@dataclass(frozen=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls: None or ANY matches anything; MATCH selects the patterns that would
    apply to the named resource (literal name, the literal wildcard, prefixes of it)."""
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    @classmethod
    def from_wire(cls, resource_type: int, name, pattern_type: int, principal, host, operation: int,
                  permission: int) -> AclBindingFilter:
        return cls(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type), principal, host,
                   _enum(Operation, operation), _enum(Permission, permission))

    def invalid(self) -> str | None:
        """Why the filter cannot match anything Kafka would (INVALID_REQUEST), or None."""
        for label, value in (("resource type", self.resource_type), ("pattern type", self.pattern_type),
                             ("operation", self.operation), ("permission type", self.permission)):
            if value.name == "UNKNOWN":
                return f"unknown {label}"
        return None

    def matches(self, b: AclBinding) -> bool:
        p, e = b.pattern, b.entry
        if self.resource_type != ResourceType.ANY and p.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not (
                    p.name == self.name if p.pattern_type == PatternType.LITERAL and p.name != WILDCARD else
                    p.name == WILDCARD if p.pattern_type == PatternType.LITERAL else self.name.startswith(p.name)):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY,) and p.pattern_type != self.pattern_type:
                return False
            if self.name is not None and p.name != self.name:
                return False
        if self.principal is not None and e.principal != self.principal:
            return False
        if self.host is not None and e.host != self.host:
            return False
        if self.operation != Operation.ANY and e.operation != self.operation:
            return False
        return self.permission == Permission.ANY or e.permission == self.permission


def binding_from_wire(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
                      permission: int) -> AclBinding:
    """A CreateAcls creation as a binding; ValueError (INVALID_REQUEST) for what Kafka refuses."""
    rt, pt = _enum(ResourceType, resource_type), _enum(PatternType, pattern_type)
    op, perm = _enum(Operation, operation), _enum(Permission, permission)
    if rt in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise ValueError("Invalid resource type")
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError("Invalid pattern type: ACLs are LITERAL or PREFIXED")
    if op in (Operation.UNKNOWN, Operation.ANY):
        raise ValueError("Invalid operation")
    if perm not in (Permission.ALLOW, Permission.DENY):
        raise ValueError("Invalid permission type")
    if not name:
        raise ValueError("Resource name must not be empty")
    if rt == ResourceType.CLUSTER and (name != CLUSTER_NAME or pt != PatternType.LITERAL):
        raise ValueError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if pt == PatternType.PREFIXED and name == WILDCARD:
        raise ValueError("A PREFIXED pattern cannot be the wildcard")
    if op != Operation.ALL and op not in SUPPORTED_OPERATIONS.get(rt, ()):
        raise ValueError(f"Operation {op.name} is not supported on {rt.name}")
    parse_principal(principal or "")
    if not host:
        raise ValueError("Host must not be empty (use '*')")
    return AclBinding(ResourcePattern(rt, name, pt), AclEntry(principal, host, op, perm))
