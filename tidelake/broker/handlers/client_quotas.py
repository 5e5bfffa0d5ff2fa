"""DescribeClientQuotas (API 48, KIP-546): what ``kafka-configs --describe --entity-type users|clients|ips`` and the
Admin client's ``describeClientQuotas`` ask. tidelake enforces no client quotas and AlterClientQuotas is not served,
so a valid filter matches no entity: the answer is Kafka's for a cluster without quotas. The filter is checked as
Kafka's ``ClientQuotaFilter`` rules are (INVALID_REQUEST for an unknown entity type, a repeated one, a match the
match type does not allow, or ip with user/client-id)."""
from __future__ import annotations

from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse

from tidelake import errors
from tidelake.broker.access import cluster_whole
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.registry import api
from tidelake.security.acl.model import Operation

ENTITY_TYPES = ("user", "client-id", "ip")
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def filter_problem(components) -> str | None:
    """Why a DescribeClientQuotas filter is invalid, or None."""
    seen: set[str] = set()
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            return f"unknown entity type {c.entity_type!r} (expected one of {', '.join(ENTITY_TYPES)})"
        if c.entity_type in seen:
            return f"duplicate filter component entity type {c.entity_type}"
        seen.add(c.entity_type)
        if c.match_type == MATCH_EXACT and c.match is None:
            return f"{c.entity_type}: an exact match needs a name"
        if c.match_type in (MATCH_DEFAULT, MATCH_ANY) and c.match is not None:
            return f"{c.entity_type}: match type {c.match_type} takes no name"
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return f"{c.entity_type}: unknown match type {c.match_type}"
    if "ip" in seen and len(seen) > 1:
        return "ip cannot be combined with user or client-id"
    return None


@api(DescribeClientQuotasRequest, DescribeClientQuotasResponse, 0, 1, access=cluster_whole(Operation.DESCRIBE_CONFIGS))
async def describe_client_quotas(broker: BrokerContext, ctx: RequestContext, request):
    problem = filter_problem(request.components)
    if problem is not None:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=errors.InvalidRequest.code,
                                            error_message=problem, entries=None)
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None, entries=[])
