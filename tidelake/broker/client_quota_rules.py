"""Client quotas (KIP-546) as Kafka 4.x's controller and metadata image judge them, as pure functions over the
stored table: which alterations are valid (``ClientQuotaControlManager``: the entity types, their combinations,
the keys each allows and their value types, with Kafka's messages) and which entities a DescribeClientQuotas
filter matches (``ClientQuotasImage.describe``: exact, default and any, strict). The table itself is
``MetadataStore.client_quotas``; the requests are ``handlers/client_quotas.py``'s.

An entity is a tuple of ``(entity type, name)`` pairs sorted by type, a name None meaning the type's default
entity (``--entity-default``)."""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from tidelake import errors

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Entity = tuple[tuple[str, "str | None"], ...]
QuotaTable = dict[Entity, dict[str, float]]

# Kafka's QuotaConfig: the keys a user and/or client-id entity takes, and an ip entity's, with their ConfigDef types
# (an integral type refuses a fraction and a value past its range).
LONG_MAX, INT_MAX, SHORT_MAX = 2 ** 63 - 1, 2 ** 31 - 1, 2 ** 15 - 1
USER_CLIENT_KEYS = {"producer_byte_rate": "LONG", "consumer_byte_rate": "LONG", "request_percentage": "DOUBLE",
                    "controller_mutation_rate": "DOUBLE"}
IP_KEYS = {"connection_creation_rate": "INT"}
_RANGE = {"SHORT": (SHORT_MAX, "a SHORT"), "INT": (INT_MAX, "an INT"), "LONG": (LONG_MAX, "a LONG")}


def entity_of(pairs) -> Entity:
    return tuple(sorted(pairs, key=lambda p: p[0]))


def describe_entity(entity: Entity) -> str:
    """Kafka's ``ClientQuotaEntity.toString``, which its messages name an entity by."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


@dataclass(frozen=True)
class Alteration:
    """One entity's part of an AlterClientQuotas request: its ``(type, name)`` pairs as sent and its ops
    ``(key, value or None to remove)``."""
    pairs: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]

    @property
    def entity(self) -> Entity:
        return entity_of(self.pairs)


def resolvable(host: str) -> bool:
    """Kafka's ``InetAddress.getByName``: an address literal, or a name the resolver knows."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
        return True
    except (socket.gaierror, UnicodeError):
        return False


def ip_hosts(alterations: list[Alteration]) -> set[str]:
    """The names of the ip entities ``alterations`` name (the caller resolves them, off its event loop)."""
    return {name for a in alterations for t, name in a.pairs if t == IP and name}


def _entity_problem(pairs, resolved: set[str]) -> tuple[str | None, dict[str, str]]:
    """Why an entity cannot be altered (None if it can) and the keys it takes (``validateEntity`` and
    ``configKeysForEntityType``); ``resolved``: the ip names that resolve."""
    if not pairs:
        return "Invalid empty client quota entity", {}
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            return f"Invalid client quota entity, duplicate entity entry {entity_type}", {}
        if entity_type not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {entity_type}", {}
        if name is not None and name == "":
            return f"Empty {entity_type} not supported", {}
        seen[entity_type] = name
    if IP in seen:
        if len(seen) > 1:
            # Kafka's message, its missing space included
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId", {}
        if seen[IP] is not None and seen[IP] not in resolved:
            return f"{seen[IP]} is not a valid IP or resolvable host.", {}
        return None, IP_KEYS
    return None, USER_CLIENT_KEYS


def _value_problem(keys: dict[str, str], key: str, value: float) -> str | None:
    """``validateQuotaKeyValue``: the key allowed for the entity, the value positive and of the key's type."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "DOUBLE":
        return None
    limit, name = _RANGE[kind]
    if value > limit:
        return f"Proposed value for {key} is too large for {name}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def alter(table: QuotaTable, alterations: list[Alteration], resolved: set[str]
          ) -> tuple[QuotaTable, list[tuple[Entity, int, str | None]]]:
    """The table after ``alterations`` and one ``(entity, error code, message)`` per entity as Kafka's controller
    answers: an entity with an invalid op changes nothing of itself (the others still apply), a second
    alteration of one entity is refused, removing a key that is not set is no change. ``resolved``: the names
    of ``ip_hosts(alterations)`` that resolve (``resolvable``)."""
    new = {entity: dict(values) for entity, values in table.items()}
    results: dict[Entity, tuple[int, str | None]] = {}
    invalid = errors.InvalidRequest.code
    for alteration in alterations:
        entity = alteration.entity
        ops: dict[str, float | None] = {}
        duplicate_key = None
        for key, value in alteration.ops:
            if key in ops:
                duplicate_key = key
            else:
                ops[key] = value
        if duplicate_key is not None:
            results[entity] = (invalid, f"Duplicate quota key {duplicate_key} not updating quota for this entity "
                                        f"{describe_entity(entity)}")
        if entity in results:  # a repeated entity, or (as Kafka answers it) a repeated key: this message either way
            results[entity] = (invalid, f"Ignoring duplicate entity {describe_entity(entity)}")
            continue
        problem, keys = _entity_problem(alteration.pairs, resolved)
        if problem is None:
            problem = next((p for key, value in ops.items() if value is not None
                            for p in [_value_problem(keys, key, value)] if p is not None), None)
        if problem is not None:
            results[entity] = (invalid, problem)
            continue
        values = new.setdefault(entity, {})
        for key, value in ops.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = float(value)
        if not values:
            del new[entity]
        results[entity] = (errors.NONE, None)
    return new, [(entity, code, message) for entity, (code, message) in results.items()]


@dataclass(frozen=True)
class Filter:
    """A DescribeClientQuotas filter: the types matched exactly (a name, or None: the default entity) and the
    types matched with any name; ``strict``: no other types in a matching entity."""
    exact: dict[str, str | None]
    any_of: frozenset[str]
    strict: bool

    def matches(self, entity: Entity) -> bool:
        names = dict(entity)
        if self.strict and len(names) != len(self.exact) + len(self.any_of):
            return False
        return all(t in names and names[t] == n for t, n in self.exact.items()) and \
            all(t in names for t in self.any_of)


def parse_filter(components, strict: bool) -> Filter:
    """The request's components as a ``Filter``, refused as ``ClientQuotasImage.describe`` refuses them:
    UNSUPPORTED_VERSION for an entity type it does not know, INVALID_REQUEST for the rest."""
    exact: dict[str, str | None] = {}
    any_of: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise errors.InvalidRequest("Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in any_of:
            raise errors.InvalidRequest(f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in ENTITY_TYPES:
            raise errors.UnsupportedVersion(f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise errors.InvalidRequest("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise errors.InvalidRequest("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_ANY:
            if c.match is not None:
                raise errors.InvalidRequest("Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                                            "string.")
            any_of.add(c.entity_type)
        else:
            raise errors.InvalidRequest(f"Unknown match type {c.match_type}")
    types = set(exact) | any_of
    if IP in types and (USER in types or CLIENT_ID in types):
        raise errors.InvalidRequest("Invalid entity filter component combination. IP filter component should not be "
                                    "used with user or clientId filter component.")
    return Filter(exact, frozenset(any_of), strict)
