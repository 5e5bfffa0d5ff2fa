"""What each API requires of the principal, Kafka's rules (``KafkaApis``' ``authorize`` calls), applied by
the dispatcher before the handler runs, only when an authorizer is configured.

* ``WHOLE``: checks on the request as a whole (the group, the transactional id, the cluster); one
  denied check answers the whole request with that resource's *_AUTHORIZATION_FAILED code.
* ``ITEMS``: per-item checks (topics, groups, config resources): denied items are taken out of the
  request the handler sees and answered with the error (echoing only names the client sent, so no
  existence is revealed); the two answers are joined into one response.
* ``LISTINGS``: listings (ListGroups, ListTransactions) keep only what the principal may describe.

Produce, Fetch, Metadata, DescribeTopicPartitions and AlterUserScramCredentials check inside their
handlers (their responses are pre-encoded, built from the topic list, or answered per user)."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.security.acl.model import CLUSTER_NAME, Operation, ResourceType

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
O = Operation
ERROR_FOR = {TOPIC: errors.TopicAuthorizationFailed, GROUP: errors.GroupAuthorizationFailed,
             CLUSTER: errors.ClusterAuthorizationFailed, TXN: errors.TransactionalIdAuthorizationFailed}
MESSAGE_FOR = {TOPIC: "Topic authorization failed.", GROUP: "Group authorization failed.",
               CLUSTER: "Cluster authorization failed.", TXN: "Transactional Id authorization failed."}
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER = 2, 4, 8


class Check:
    """``allowed(op, type, name)`` for one request's principal and host."""
    __slots__ = ("_authorize", "principal", "host", "_topics")

    def __init__(self, broker: BrokerContext, ctx: RequestContext):
        self._authorize = broker.security.authorizer.authorize
        self.principal, self.host = ctx.session.principal, ctx.session.client_host
        self._topics = broker.topics

    def topic_name(self, topic_id) -> str | None:
        """The name of the topic with this id (None if there is none): ACLs name topics, requests may not."""
        info = self._topics.by_id(topic_id)
        return info.name if info is not None else None

    def allowed(self, op: Operation, resource_type: ResourceType, name: str) -> bool:
        return self._authorize(self.principal, self.host, op, resource_type, name)

    def cluster(self, op: Operation) -> bool:
        return self._authorize(self.principal, self.host, op, CLUSTER, CLUSTER_NAME)


Need = tuple  # (operation, resource type, name)


@dataclass(frozen=True)
class ItemRule:
    """Per-item check: ``items`` is the request's array attribute, ``response`` the response's;
    ``allowed(check, item)`` decides one item; denied ones get ``code``."""
    items: Callable[[int], str]  # version -> request attribute
    response: Callable[[int], str]  # version -> response attribute
    allowed: Callable[[Check, Any], bool]
    code: int | Callable[[Any], int]  # the error for a denied item (a function when it depends on the item)


def _always(attr: str) -> Callable[[int], str]:
    return lambda _v: attr


WHOLE: dict[int, Callable[[Any, int], list[Need]]] = {
    4: lambda r, v: [(O.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)],  # LeaderAndIsr (the controller's requests)
    5: lambda r, v: [(O.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)],  # StopReplica
    6: lambda r, v: [(O.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)],  # UpdateMetadata
    7: lambda r, v: [(O.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)],  # ControlledShutdown
    27: lambda r, v: [(O.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)],  # WriteTxnMarkers (a coordinator to leaders)
    8: lambda r, v: [(O.READ, GROUP, r.group_id)],  # OffsetCommit
    9: lambda r, v: [] if v >= 8 else [(O.DESCRIBE, GROUP, r.group_id)],  # OffsetFetch (v8+: per group, below)
    10: lambda r, v: [(O.DESCRIBE, TXN if (r.key_type if v >= 1 else 0) == 1 else GROUP, k)
                      for k in (r.coordinator_keys if v >= 4 else [r.key])],  # FindCoordinator
    11: lambda r, v: [(O.READ, GROUP, r.group_id)],  # JoinGroup
    12: lambda r, v: [(O.READ, GROUP, r.group_id)],  # Heartbeat
    13: lambda r, v: [(O.READ, GROUP, r.group_id)],  # LeaveGroup
    14: lambda r, v: [(O.READ, GROUP, r.group_id)],  # SyncGroup
    22: lambda r, v: [(O.WRITE, TXN, r.transactional_id)] if r.transactional_id is not None else [],  # InitProducerId
    # AddPartitionsToTxn: v4+ is the brokers' batched verification (CLUSTER_ACTION), clients use v0-3
    24: lambda r, v: ([(O.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)] if v >= 4 else
                      [(O.WRITE, TXN, r.v3_and_below_transactional_id)]),
    25: lambda r, v: [(O.WRITE, TXN, r.transactional_id), (O.READ, GROUP, r.group_id)],  # AddOffsetsToTxn
    26: lambda r, v: [(O.WRITE, TXN, r.transactional_id)],  # EndTxn
    28: lambda r, v: [(O.WRITE, TXN, r.transactional_id), (O.READ, GROUP, r.group_id)],  # TxnOffsetCommit
    29: lambda r, v: [(O.DESCRIBE, CLUSTER, CLUSTER_NAME)],  # DescribeAcls
    30: lambda r, v: [(O.ALTER, CLUSTER, CLUSTER_NAME)],  # CreateAcls
    31: lambda r, v: [(O.ALTER, CLUSTER, CLUSTER_NAME)],  # DeleteAcls
    35: lambda r, v: [(O.DESCRIBE, CLUSTER, CLUSTER_NAME)],  # DescribeLogDirs
    43: lambda r, v: [(O.ALTER, CLUSTER, CLUSTER_NAME)],  # ElectLeaders
    45: lambda r, v: [(O.ALTER, CLUSTER, CLUSTER_NAME)],  # AlterPartitionReassignments
    46: lambda r, v: [(O.DESCRIBE, CLUSTER, CLUSTER_NAME)],  # ListPartitionReassignments
    47: lambda r, v: [(O.DELETE, GROUP, r.group_id)],  # OffsetDelete
    50: lambda r, v: [(O.DESCRIBE, CLUSTER, CLUSTER_NAME)],  # DescribeUserScramCredentials
    # ConsumerGroupHeartbeat: as Kafka, a subscription naming a topic the member may not describe fails
    # whole with TOPIC_AUTHORIZATION_FAILED (a client never learns of topics it cannot see)
    68: lambda r, v: [(O.READ, GROUP, r.group_id)] + [(O.DESCRIBE, TOPIC, t) for t in r.subscribed_topic_names or ()],
    # KIP-932 share groups: GROUP READ, as Kafka; ShareFetch / ShareAcknowledge check TOPIC READ per topic
    76: lambda r, v: [(O.READ, GROUP, r.group_id)] + [(O.DESCRIBE, TOPIC, t) for t in r.subscribed_topic_names or ()],
    78: lambda r, v: [(O.READ, GROUP, r.group_id)],  # ShareFetch
    79: lambda r, v: [(O.READ, GROUP, r.group_id)],  # ShareAcknowledge
    91: lambda r, v: [(O.READ, GROUP, r.group_id)] + [(O.READ, TOPIC, t.topic_name) for t in r.topics],
    92: lambda r, v: [(O.DELETE, GROUP, r.group_id)] + [(O.READ, TOPIC, t.topic_name) for t in r.topics],
}


def _config_resource(op_topic: Operation):
    def allowed(c: Check, res) -> bool:
        if res.resource_type == CONFIG_TOPIC:
            return c.allowed(op_topic, TOPIC, res.resource_name)
        if res.resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER):
            return c.cluster(op_topic)
        return True
    return allowed


def _config_error(res) -> int:
    return (errors.TopicAuthorizationFailed.code if res.resource_type == CONFIG_TOPIC
            else errors.ClusterAuthorizationFailed.code)


def _topic(op: Operation, attr: str = "name"):
    return lambda c, item: c.allowed(op, TOPIC, getattr(item, attr))


def _may_delete_topic(c: Check, t) -> bool:
    if isinstance(t, str):  # DeleteTopics v0-5: names
        return c.allowed(O.DELETE, TOPIC, t)
    name = t.name or c.topic_name(t.topic_id)
    # an id no topic has is the handler's UNKNOWN_TOPIC_ID: it names nothing a denial could hide
    return name is None or c.allowed(O.DELETE, TOPIC, name)


_T = errors.TopicAuthorizationFailed.code
ITEMS: dict[int, ItemRule] = {
    2: ItemRule(_always("topics"), _always("topics"), _topic(O.DESCRIBE), _T),  # ListOffsets
    8: ItemRule(_always("topics"), _always("topics"), _topic(O.READ), _T),  # OffsetCommit
    # OffsetFetch: v1-7 one group, its topics checked one by one; v8+ several groups, each answered on its own
    9: ItemRule(lambda v: "groups" if v >= 8 else "topics", lambda v: "groups" if v >= 8 else "topics",
                lambda c, item: (c.allowed(O.DESCRIBE, GROUP, item.group_id) if hasattr(item, "group_id")
                                 else c.allowed(O.DESCRIBE, TOPIC, item.name)),
                lambda item: errors.GroupAuthorizationFailed.code if hasattr(item, "group_id") else _T),
    19: ItemRule(_always("topics"), _always("topics"),
                 lambda c, t: c.cluster(O.CREATE) or c.allowed(O.CREATE, TOPIC, t.name), _T),  # CreateTopics
    20: ItemRule(lambda v: "topics" if v >= 6 else "topic_names", _always("responses"),
                 lambda c, t: t is None or _may_delete_topic(c, t),
                 _T),  # DeleteTopics (by id: the id's topic; an unknown id is the handler's UNKNOWN_TOPIC_ID)
    21: ItemRule(_always("topics"), _always("topics"), _topic(O.DELETE), _T),  # DeleteRecords
    23: ItemRule(_always("topics"), _always("topics"), _topic(O.DESCRIBE, "topic"), _T),  # OffsetForLeaderEpoch
    24: ItemRule(_always("v3_and_below_topics"), _always("results_by_topic_v3_and_below"), _topic(O.WRITE), _T),
    28: ItemRule(_always("topics"), _always("topics"), _topic(O.READ), _T),  # TxnOffsetCommit
    32: ItemRule(_always("resources"), _always("results"), _config_resource(O.DESCRIBE_CONFIGS),
                 _config_error),  # DescribeConfigs
    33: ItemRule(_always("resources"), _always("responses"), _config_resource(O.ALTER_CONFIGS), _config_error),
    37: ItemRule(_always("topics"), _always("results"), _topic(O.ALTER), _T),  # CreatePartitions
    42: ItemRule(_always("groups_names"), _always("results"), lambda c, g: c.allowed(O.DELETE, GROUP, g),
                 errors.GroupAuthorizationFailed.code),  # DeleteGroups
    44: ItemRule(_always("resources"), _always("responses"), _config_resource(O.ALTER_CONFIGS), _config_error),
    47: ItemRule(_always("topics"), _always("topics"), _topic(O.READ), _T),  # OffsetDelete
    15: ItemRule(_always("groups"), _always("groups"), lambda c, g: c.allowed(O.DESCRIBE, GROUP, g),
                 errors.GroupAuthorizationFailed.code),  # DescribeGroups
    61: ItemRule(_always("topics"), _always("topics"), _topic(O.READ), _T),  # DescribeProducers
    65: ItemRule(_always("transactional_ids"), _always("transaction_states"),
                 lambda c, t: c.allowed(O.DESCRIBE, TXN, t),
                 errors.TransactionalIdAuthorizationFailed.code),  # DescribeTransactions
    69: ItemRule(_always("group_ids"), _always("groups"), lambda c, g: c.allowed(O.DESCRIBE, GROUP, g),
                 errors.GroupAuthorizationFailed.code),  # ConsumerGroupDescribe
    77: ItemRule(_always("group_ids"), _always("groups"), lambda c, g: c.allowed(O.DESCRIBE, GROUP, g),
                 errors.GroupAuthorizationFailed.code),  # ShareGroupDescribe
    90: ItemRule(_always("groups"), _always("groups"), lambda c, g: c.allowed(O.DESCRIBE, GROUP, g.group_id),
                 errors.GroupAuthorizationFailed.code),  # DescribeShareGroupOffsets
}
# AddPartitionsToTxn v4+ has no per-topic list at the top (checked whole).
_ITEMS_MAX_VERSION = {24: 3}

# listings: response attribute, and what must be describable for an item to be listed
LISTINGS: dict[int, tuple[str, Callable[[Check, Any], bool]]] = {
    16: ("groups", lambda c, g: c.cluster(O.DESCRIBE) or c.allowed(O.DESCRIBE, GROUP, g.group_id)),  # ListGroups
    66: ("transaction_states", lambda c, t: c.allowed(O.DESCRIBE, TXN, t.transactional_id)),  # ListTransactions
}


# every API the dispatcher checks (the others check in their handlers, or need nothing)
RULED_APIS = frozenset(WHOLE) | frozenset(ITEMS) | frozenset(LISTINGS)


def _whole_request_error(check: Check, needs: list[Need]) -> errors.KafkaApiError | None:
    for op, rtype, name in needs:
        if name is None or not check.allowed(op, rtype, name):
            return ERROR_FOR[rtype](MESSAGE_FOR[rtype])
    return None


def authorize_request(broker: BrokerContext, ctx: RequestContext, api_key: int, request):
    """(request for the handler, [(request holding only denied items, their error code)]). Raises the
    *_AUTHORIZATION_FAILED error when the request as a whole is denied."""
    whole = WHOLE.get(api_key)
    rule = ITEMS.get(api_key)
    if whole is None and rule is None:  # Produce, Fetch, Metadata...: checked in their handlers
        return request, ()
    version = ctx.api_version
    check = Check(broker, ctx)
    if whole is not None:
        denied = _whole_request_error(check, whole(request, version))
        if denied is not None:
            raise denied
        if api_key == 22 and request.transactional_id is None and not (
                check.cluster(O.IDEMPOTENT_WRITE) or broker.security.authorizer.may_any(
                    check.principal, check.host, O.WRITE, TOPIC)):
            raise errors.ClusterAuthorizationFailed(MESSAGE_FOR[CLUSTER])  # KIP-679
    if rule is None or version > _ITEMS_MAX_VERSION.get(api_key, version):
        return request, ()
    attr = rule.items(version)
    items = getattr(request, attr, None)
    if not items:
        return request, ()
    allowed, denied = [], {}
    for item in items:
        if rule.allowed(check, item):
            allowed.append(item)
        else:
            code = rule.code(item) if callable(rule.code) else rule.code
            denied.setdefault(code, []).append(item)
    if not denied:
        return request, ()
    permitted = copy.copy(request)
    setattr(permitted, attr, allowed)
    refusals = []
    for code, denied_items in denied.items():
        refused = copy.copy(request)
        setattr(refused, attr, denied_items)
        refusals.append((refused, code))
    return permitted, refusals


def merge_denied(api_key: int, version: int, response, denied_response) -> None:
    """Append the denied items' answers to the handler's response."""
    attr = ITEMS[api_key].response(version)
    getattr(response, attr).extend(getattr(denied_response, attr))


def filter_listing(broker: BrokerContext, ctx: RequestContext, api_key: int, response) -> None:
    listing = LISTINGS.get(api_key)
    if listing is None or response is None:
        return
    attr, visible = listing
    check = Check(broker, ctx)
    setattr(response, attr, [item for item in getattr(response, attr) if visible(check, item)])
