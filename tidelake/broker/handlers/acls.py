"""ACL administration: CreateAcls, DescribeAcls, DeleteAcls (Kafka's model, ``tidelake.security.acl``).
Without an authorizer (``authorizer.class.name`` empty) they answer SECURITY_DISABLED, as Kafka does.
Changes are persisted (``SecurityStore``) before the answer."""
from __future__ import annotations

from itertools import groupby

from kafka.protocol.admin import (CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
                                  DescribeAclsRequest, DescribeAclsResponse)

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.access import cluster_whole
from tidelake.broker.registry import api
from tidelake.security.acl.model import AclBindingFilter, Operation, PatternType, binding_from_wire

_NO_AUTHORIZER = "No Authorizer is configured on the broker"


@api(CreateAclsRequest, CreateAclsResponse, 0, 3, access=cluster_whole(Operation.ALTER))
async def create_acls(broker: BrokerContext, ctx: RequestContext, request):
    authorizer = broker.security.authorizer
    R = CreateAclsResponse.AclCreationResult
    if authorizer is None:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            R(error_code=errors.SecurityDisabled.code, error_message=_NO_AUTHORIZER) for _ in request.creations])
    results, bindings = [], []
    for c in request.creations:
        pattern_type = c.resource_pattern_type if ctx.api_version >= 1 else PatternType.LITERAL
        try:
            bindings.append(binding_from_wire(c.resource_type, c.resource_name, pattern_type, c.principal, c.host,
                                              c.operation, c.permission_type))
            results.append(R(error_code=errors.NONE, error_message=None))
        except ValueError as e:
            results.append(R(error_code=errors.InvalidRequest.code, error_message=str(e)))
    if bindings:
        authorizer.add(bindings)
    return CreateAclsResponse(throttle_time_ms=0, results=results)


def _filter(f, version: int) -> AclBindingFilter:
    return AclBindingFilter.from_wire(f.resource_type_filter, f.resource_name_filter,
                                      f.pattern_type_filter if version >= 1 else PatternType.LITERAL,
                                      f.principal_filter, f.host_filter, f.operation, f.permission_type)


@api(DescribeAclsRequest, DescribeAclsResponse, 0, 3, access=cluster_whole(Operation.DESCRIBE))
async def describe_acls(broker: BrokerContext, ctx: RequestContext, request):
    authorizer = broker.security.authorizer
    if authorizer is None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=errors.SecurityDisabled.code,
                                    error_message=_NO_AUTHORIZER, resources=[])
    flt = _filter(request, ctx.api_version)
    problem = flt.invalid()
    if problem is not None:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=errors.InvalidRequest.code, error_message=problem,
                                    resources=[])
    Res = DescribeAclsResponse.DescribeAclsResource
    key = lambda b: (b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type)  # noqa: E731
    resources = []
    for (rtype, name, ptype), group in groupby(sorted(authorizer.bindings(flt), key=key), key=key):
        acls = [Res.AclDescription(principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
                                   permission_type=b.entry.permission) for b in group]
        resources.append(Res(resource_type=rtype, resource_name=name, pattern_type=ptype, acls=acls))
    return DescribeAclsResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None, resources=resources)


@api(DeleteAclsRequest, DeleteAclsResponse, 0, 3, access=cluster_whole(Operation.ALTER))
async def delete_acls(broker: BrokerContext, ctx: RequestContext, request):
    authorizer = broker.security.authorizer
    FR = DeleteAclsResponse.DeleteAclsFilterResult
    M = FR.DeleteAclsMatchingAcl
    if authorizer is None:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FR(error_code=errors.SecurityDisabled.code, error_message=_NO_AUTHORIZER, matching_acls=[])
            for _ in request.filters])
    out = []
    for f in request.filters:
        flt = _filter(f, ctx.api_version)
        problem = flt.invalid()
        if problem is not None:
            out.append(FR(error_code=errors.InvalidRequest.code, error_message=problem, matching_acls=[]))
            continue
        gone = authorizer.remove(flt)
        out.append(FR(error_code=errors.NONE, error_message=None, matching_acls=[
            M(error_code=errors.NONE, error_message=None, resource_type=b.pattern.resource_type,
              resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
              host=b.entry.host, operation=b.entry.operation, permission_type=b.entry.permission) for b in gone]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=out)
