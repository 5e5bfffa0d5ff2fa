"""What an API requires of the principal: the vocabulary of the ``access=`` rule every ``@api``
declaration carries (Kafka's ``authorize`` calls in ``KafkaApis``, one rule per API).

An ``Access`` has up to four parts, each optional, and an API with none says why (``open_to_all``):

* ``whole``: checks on the request as a whole (the group, the transactional id, the cluster); the first
  denied one answers the whole request with that resource's *_AUTHORIZATION_FAILED code.
* ``items``: a per-item check over one array of the request; the dispatcher hands the handler only the
  permitted items and answers the denied ones with the rule's code (echoing only names the client sent,
  so no existence is revealed).
* ``listing``: a listing (ListGroups, ListTransactions) keeps only what the principal may describe.
* ``in_handler``: checks on items only the handler can name (a fetch session's partitions, topics named by
  id, every topic a listing would show, pre-encoded responses); the handler asks ``ctx.grants`` whether
  one of these declared checks permits an item, so the operation and resource type still live here.

The dispatcher (``tidelake.broker.authorization``) applies the first three; without an authorizer
nothing is checked.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from tidelake import errors
from tidelake.security.acl.model import CLUSTER_NAME, Operation, ResourceType

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
ERROR_FOR = {TOPIC: errors.TopicAuthorizationFailed, GROUP: errors.GroupAuthorizationFailed,
             CLUSTER: errors.ClusterAuthorizationFailed, TXN: errors.TransactionalIdAuthorizationFailed}
MESSAGE_FOR = {TOPIC: "Topic authorization failed.", GROUP: "Group authorization failed.",
               CLUSTER: "Cluster authorization failed.", TXN: "Transactional Id authorization failed."}
# DescribeConfigs/AlterConfigs resource types (Kafka's ConfigResource.Type)
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_GROUP = 2, 4, 8, 32
TOPIC_DENIED = errors.TopicAuthorizationFailed.code
GROUP_DENIED = errors.GroupAuthorizationFailed.code
TXN_DENIED = errors.TransactionalIdAuthorizationFailed.code


class Check:
    """``allowed(op, type, name)`` for one request's principal and host."""
    __slots__ = ("_authorizer", "principal", "host", "_topic_by_id")

    def __init__(self, authorizer, principal: str, host: str, topic_by_id: Callable[[Any], Any]):
        self._authorizer = authorizer
        self.principal, self.host = principal, host
        self._topic_by_id = topic_by_id

    def topic_name(self, topic_id) -> str | None:
        """The name of the topic with this id (None if there is none): ACLs name topics, requests may not."""
        info = self._topic_by_id(topic_id)
        return info.name if info is not None else None

    def allowed(self, op: Operation, resource_type: ResourceType, name: str) -> bool:
        return self._authorizer.authorize(self.principal, self.host, op, resource_type, name)

    def cluster(self, op: Operation) -> bool:
        return self._authorizer.authorize(self.principal, self.host, op, CLUSTER, CLUSTER_NAME)

    def any_of_type(self, op: Operation, resource_type: ResourceType) -> bool:
        """Whether some ACL lets the principal do ``op`` on some resource of this type (KIP-679)."""
        return self._authorizer.may_any(self.principal, self.host, op, resource_type)


@dataclass(frozen=True)
class Need:
    """One whole-request check: ``operation`` on the resource; a None ``name`` is denied."""
    operation: Operation
    resource_type: ResourceType
    name: str | None

    def allowed(self, check: Check) -> bool:
        return self.name is not None and check.allowed(self.operation, self.resource_type, self.name)


@dataclass(frozen=True)
class EitherNeed:
    """Kafka's KIP-679 idempotent-producer check: ``operation`` on the cluster, or ``fallback`` on any
    resource of ``fallback_type``; denied: ``resource_type``'s error."""
    operation: Operation
    fallback: Operation
    fallback_type: ResourceType
    resource_type: ResourceType = CLUSTER

    def allowed(self, check: Check) -> bool:
        return check.cluster(self.operation) or check.any_of_type(self.fallback, self.fallback_type)


WholeRule = Callable[[Any, int], Sequence["Need | EitherNeed"]]  # (request, version) -> checks


@dataclass(frozen=True)
class ItemRule:
    """Per-item check: ``items(version)`` names the request's array, ``response(version)`` the
    response's; ``allowed(check, item)`` decides one item; a denied one gets ``code`` (a function of the
    item when it depends on it). Applied up to ``max_version`` (None: every served version)."""
    items: Callable[[int], str]
    response: Callable[[int], str]
    allowed: Callable[[Check, Any], bool]
    code: int | Callable[[Any], int]
    max_version: int | None = None

    def denied_code(self, item) -> int:
        return self.code(item) if callable(self.code) else self.code


@dataclass(frozen=True)
class ListingRule:
    """A listing keeps the ``response`` array's items the principal may ``visible(check, item)``."""
    response: str
    visible: Callable[[Check, Any], bool]


@dataclass(frozen=True)
class HandlerCheck:
    """A check the handler applies to items only it can name: ``operation`` on the ``resource_type``
    resource of that name (the cluster: its one name), or, with ``cluster_suffices``, on the cluster."""
    operation: Operation
    resource_type: ResourceType
    cluster_suffices: bool = False

    def allowed(self, check: Check, name: str) -> bool:
        if self.resource_type == CLUSTER:
            return check.cluster(self.operation)
        return ((self.cluster_suffices and check.cluster(self.operation))
                or check.allowed(self.operation, self.resource_type, name))


@dataclass(frozen=True)
class Access:
    """An API's whole authorization rule (see the module's docstring)."""
    whole: WholeRule | None = None
    items: ItemRule | None = None
    listing: ListingRule | None = None
    in_handler: frozenset[HandlerCheck] = field(default_factory=frozenset)
    open_because: str | None = None  # why an API with no check needs none

    def __post_init__(self):
        checked = (self.whole, self.items, self.listing) != (None, None, None) or bool(self.in_handler)
        if checked == (self.open_because is not None):
            raise ValueError("an API's access rule either checks something or says why it needs no check")


def open_to_all(reason: str) -> Access:
    return Access(open_because=reason)


def whole(rule: WholeRule) -> Access:
    return Access(whole=rule)


def cluster_whole(op: Operation) -> Access:
    """The request as a whole needs ``op`` on the cluster."""
    needs = (Need(op, CLUSTER, CLUSTER_NAME),)
    return Access(whole=lambda _r, _v: needs)


def per_item(items: str | Callable[[int], str], response: str | Callable[[int], str],
             allowed: Callable[[Check, Any], bool], code: int | Callable[[Any], int],
             whole: WholeRule | None = None, max_version: int | None = None) -> Access:
    return Access(whole=whole, items=ItemRule(_by_version(items), _by_version(response), allowed, code, max_version))


def in_handler(*checks: HandlerCheck) -> Access:
    return Access(in_handler=frozenset(checks))


def _by_version(attr: str | Callable[[int], str]) -> Callable[[int], str]:
    return attr if callable(attr) else (lambda _v: attr)


def topic(op: Operation, attr: str = "name") -> Callable[[Check, Any], bool]:
    """An item naming a topic in ``attr`` is allowed with ``op`` on that topic."""
    return lambda c, item: c.allowed(op, TOPIC, getattr(item, attr))


def config_resource(op: Operation) -> Callable[[Check, Any], bool]:
    """A config resource: a topic's needs ``op`` on the topic, a group's on the group, a broker's (or its
    loggers') on the cluster."""
    def allowed(c: Check, res) -> bool:
        if res.resource_type == CONFIG_TOPIC:
            return c.allowed(op, TOPIC, res.resource_name)
        if res.resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER):
            return c.cluster(op)
        if res.resource_type == CONFIG_GROUP:
            return c.allowed(op, GROUP, res.resource_name)
        return True
    return allowed


def config_resource_denied(res) -> int:
    if res.resource_type == CONFIG_GROUP:
        return GROUP_DENIED
    return TOPIC_DENIED if res.resource_type == CONFIG_TOPIC else errors.ClusterAuthorizationFailed.code


class Grants:
    """What ``ctx.grants`` answers a handler: whether one of its API's declared ``in_handler`` checks
    permits an item. Asking about a check the declaration does not make is a programming error."""
    __slots__ = ("_check", "_declared")

    def __init__(self, check: Check | None, declared: frozenset[HandlerCheck]):
        self._check, self._declared = check, declared

    def permits(self, rule: HandlerCheck, name: str) -> bool:
        if rule not in self._declared:
            raise LookupError(f"{rule} is not declared by this API's access rule")
        return self._check is None or rule.allowed(self._check, name)


class _AllGranted(Grants):
    """Without an authorizer: every check permits (no per-request allocation on the hot paths)."""
    __slots__ = ()

    def __init__(self):
        super().__init__(None, frozenset())

    def permits(self, rule: HandlerCheck, name: str) -> bool:
        return True


ALL_GRANTED = _AllGranted()
