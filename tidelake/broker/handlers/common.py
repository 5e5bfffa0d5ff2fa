"""Helpers shared by the handler modules: per-partition answers, the operations a principal may do on a
resource (KIP-430's reported ``authorized_operations``, not a check)."""
from __future__ import annotations

from tidelake import errors
from tidelake.errors import error_code
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.security.acl.model import SUPPORTED_OPERATIONS, ResourceType


def per_partition(broker: BrokerContext, topic: str, partitions, answer, fail,
                  index=lambda p: p.partition_index) -> list:
    """One answer per requested partition (``index(p)`` is its number): ``answer(log, p)``, or
    ``fail(p, code)`` with UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist and the
    error's code when ``answer`` raises, so one bad partition never fails the others."""
    out = []
    for p in partitions:
        plog = broker.logs.get(topic, index(p))
        if plog is None:
            out.append(fail(p, broker.missing_log_code(topic, index(p))))
            continue
        try:
            out.append(answer(plog, p))
        except Exception as e:
            out.append(fail(p, error_code(e)))
    return out


def authorized_operations(broker: BrokerContext, ctx: RequestContext, resource_type: ResourceType,
                          name: str) -> set[int]:
    """KIP-430: the operations (codes) a describe call that asked for them reports (every supported one
    without an authorizer, as Kafka answers). kafka-python's ``bitfield`` fields take this set;
    ``bit_set`` makes the int32 of the others."""
    authorizer = broker.security.authorizer
    ops = SUPPORTED_OPERATIONS[resource_type]
    if authorizer is None:
        return {int(op) for op in ops}
    principal, host = ctx.session.principal, ctx.session.client_host
    return {int(op) for op in ops if authorizer.authorize(principal, host, op, resource_type, name)}


def bit_set(ops: set[int]) -> int:
    bits = 0
    for op in ops:
        bits |= 1 << op
    return bits
