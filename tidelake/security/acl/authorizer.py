"""The ACL authorizer, Kafka's rules (``AclAuthorizer`` / ``StandardAuthorizer``):

* super users (``super.users``) may do everything;
* the ACLs that apply to a resource are its literal ones, the literal wildcard ``*`` and every
  PREFIXED pattern that is a prefix of its name;
* a matching DENY (principal or ``User:*``, host or ``*``, the operation or ALL) wins;
* otherwise a matching ALLOW grants (READ/WRITE/DELETE/ALTER also grant DESCRIBE, ALTER_CONFIGS grants
  DESCRIBE_CONFIGS);
* a resource with no ACL at all is allowed only with ``allow.everyone.if.no.acl.found=true``.

Decisions are cached per (principal, host, operation, resource) until the ACLs change, so the
produce path pays one dict lookup per topic whatever the number of ACLs."""
from __future__ import annotations

import threading
from typing import Callable, Iterable

from tidelake.security.acl.model import (IMPLIED_BY, SUPPORTED_OPERATIONS, WILDCARD, AclBinding, AclBindingFilter,
                                         AclEntry, Operation, PatternType, Permission, ResourceType)
from tidelake.security.principal import WILDCARD_PRINCIPAL

# Kafka's names for its authorizer; both mean this one
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
_CACHE_LIMIT = 100_000


class Authorizer:
    def __init__(self, super_users: frozenset[str] = frozenset(), allow_everyone_if_no_acl_found: bool = False,
                 bindings: Iterable[AclBinding] = (), on_change: Callable[[list[AclBinding]], None] | None = None):
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._bindings: dict[AclBinding, None] = dict.fromkeys(bindings)  # insertion-ordered set
        self._on_change = on_change
        self._lock = threading.Lock()
        self._literal: dict[tuple[ResourceType, str], list[AclEntry]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[AclEntry]]] = {}
        self._cache: dict[tuple, bool] = {}
        self._reindex()

    # -- decisions --------------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            cache = self._cache
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[key] = decision
        return decision

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430: the bit set (1 << operation code) of what ``principal`` may do on the resource."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def may_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType`` (KIP-679: WRITE on any topic lets a producer be
        idempotent): some ALLOW for ``operation`` on a resource of the type, not denied for all of them."""
        if principal in self.super_users:
            return True
        principals, hosts, ops = (principal, WILDCARD_PRINCIPAL), (host, WILDCARD), (operation, Operation.ALL)
        denied_everywhere = any(e.permission == Permission.DENY and e.principal in principals and e.host in hosts
                                and e.operation in ops for e in self._literal.get((resource_type, WILDCARD), ()))
        if denied_everywhere:
            return False
        entries = [e for (rtype, _name), es in self._literal.items() if rtype == resource_type for e in es]
        entries += [e for es in self._prefixed.get(resource_type, {}).values() for e in es]
        if not entries and self.allow_everyone_if_no_acl_found:
            return True
        return any(e.permission == Permission.ALLOW and e.principal in principals and e.host in hosts
                   and e.operation in ops for e in entries)

    def _matching_entries(self, resource_type: ResourceType, name: str) -> list[AclEntry]:
        out = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out.extend(self._literal.get((resource_type, WILDCARD), ()))
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for i in range(1, len(name) + 1):
                entries = prefixed.get(name[:i])
                if entries:
                    out.extend(entries)
        return out

    def _decide(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        entries = self._matching_entries(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        for e in entries:
            if (e.permission == Permission.DENY and e.principal in principals and e.host in hosts
                    and e.operation in (operation, Operation.ALL)):
                return False
        allowed_by = IMPLIED_BY.get(operation) or (operation, Operation.ALL)
        return any(e.permission == Permission.ALLOW and e.principal in principals and e.host in hosts
                   and e.operation in allowed_by for e in entries)

    # -- ACL management -------------------------------------------------------------------------
    def bindings(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        with self._lock:
            items = list(self._bindings)
        return items if flt is None else [b for b in items if flt.matches(b)]

    def add(self, bindings: Iterable[AclBinding]) -> None:
        with self._lock:
            for b in bindings:
                self._bindings[b] = None
            self._changed()

    def remove(self, flt: AclBindingFilter) -> list[AclBinding]:
        with self._lock:
            gone = [b for b in self._bindings if flt.matches(b)]
            for b in gone:
                del self._bindings[b]
            if gone:
                self._changed()
        return gone

    def _changed(self) -> None:
        self._reindex()
        if self._on_change is not None:
            self._on_change(list(self._bindings))

    def _reindex(self) -> None:
        literal: dict[tuple[ResourceType, str], list[AclEntry]] = {}
        prefixed: dict[ResourceType, dict[str, list[AclEntry]]] = {}
        for b in self._bindings:
            p = b.pattern
            if p.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(p.resource_type, {}).setdefault(p.name, []).append(b.entry)
            else:
                literal.setdefault((p.resource_type, p.name), []).append(b.entry)
        self._literal, self._prefixed = literal, prefixed
        self._cache = {}
