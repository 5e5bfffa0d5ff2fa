"""Client quotas (KIP-546): AlterClientQuotas (API 49) and DescribeClientQuotas (API 48), what ``kafka-configs
--alter|--describe --entity-type users|clients|ips`` and the Admin client's ``alterClientQuotas`` /
``describeClientQuotas`` send. The rules (entity types and defaults, keys, values, filters) are Kafka 4.x's, in
``client_quota_rules.py``; the table is kept in the broker's metadata file (``MetadataStore.client_quotas``),
beside the dynamic broker configs, so a restart serves the same quotas. In a cluster each broker keeps the quotas
set through it, as its dynamic broker configs and SCRAM credentials (Kafka's ZooKeeper mode kept them under
``/config/users|clients|ips``: not written here).

The quotas are stored and described, not enforced: requests are never throttled (throttle_time_ms 0)."""
from __future__ import annotations

import asyncio

from kafka.protocol.admin import (AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
                                  DescribeClientQuotasResponse)

from tidelake import errors
from tidelake.broker.access import cluster_whole
from tidelake.broker.client_quota_rules import Alteration, alter, ip_hosts, parse_filter, resolvable
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.registry import api
from tidelake.errors import error_code
from tidelake.security.acl.model import Operation

_DEntry = DescribeClientQuotasResponse.EntryData
_AEntry = AlterClientQuotasResponse.EntryData


@api(DescribeClientQuotasRequest, DescribeClientQuotasResponse, 0, 1, access=cluster_whole(Operation.DESCRIBE_CONFIGS))
async def describe_client_quotas(broker: BrokerContext, ctx: RequestContext, request):
    try:
        wanted = parse_filter(request.components, bool(request.strict))
    except errors.KafkaApiError as e:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=error_code(e), error_message=str(e),
                                            entries=None)
    entries = [_DEntry(entity=[_DEntry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                       values=[_DEntry.ValueData(key=k, value=v) for k, v in sorted(values.items())])
               for entity, values in broker.metadata.client_quotas.items() if wanted.matches(entity)]
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None,
                                        entries=entries)


def _alter_failed(request, _version: int, code: int, message: str):
    """A refused request's answer: every entry's entity echoed with the error (Kafka's getErrorResponse)."""
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        _AEntry(error_code=code, error_message=message,
                entity=[_AEntry.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in request.entries])


@api(AlterClientQuotasRequest, AlterClientQuotasResponse, 0, 1, access=cluster_whole(Operation.ALTER_CONFIGS),
     error_response=_alter_failed)
async def alter_client_quotas(broker: BrokerContext, ctx: RequestContext, request):
    alterations = [Alteration(pairs=tuple((e.entity_type, e.entity_name) for e in entry.entity),
                              ops=tuple((op.key, None if op.remove else op.value) for op in entry.ops))
                   for entry in request.entries]
    # an ip entity may name a host, which Kafka resolves (InetAddress.getByName): resolved off the event loop first,
    # then the table altered with no await between its read and its write
    hosts = ip_hosts(alterations)
    resolved = await asyncio.to_thread(lambda: {h for h in hosts if resolvable(h)}) if hosts else set()
    table, results = alter(broker.metadata.client_quotas, alterations, resolved)
    if not request.validate_only and table != broker.metadata.client_quotas:
        broker.metadata.set_client_quotas(table)
        await broker.metadata.save_async()
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        _AEntry(error_code=code, error_message=message,
                entity=[_AEntry.EntityData(entity_type=t, entity_name=n) for t, n in entity])
        for entity, code, message in results])
