"""Helpers shared by the handler modules: per-partition answers, the operations a principal may do on a
resource (KIP-430's reported ``authorized_operations``, not a check)."""
from __future__ import annotations

from tidelake.errors import error_code
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.security.acl.model import SUPPORTED_OPERATIONS, ResourceType


def per_partition(partitions, answer, fail) -> list:
    """One answer per requested partition: ``answer(p)`` (which asks the partition service), or ``fail(p, code)``
    with the error's code when it raises, so one bad partition never fails the others."""
    out = []
    for p in partitions:
        try:
            out.append(answer(p))
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
