"""The dispatcher's side of authorization: each API's declared ``Access`` rule (``tidelake.broker.access``,
given in its ``@api`` declaration) applied to one request, the same way for every API, only when an
authorizer is configured.

A per-item rule splits the request in two new requests (built through the message class, the decoded one
is left as it is): the permitted items for the handler, the denied ones for an error response whose items
are joined to the handler's answer."""
from __future__ import annotations

from dataclasses import dataclass

from tidelake.broker.access import ALL_GRANTED, MESSAGE_FOR, ERROR_FOR, Access, Check, Grants
from tidelake.broker.context import BrokerContext


@dataclass(frozen=True)
class Refusal:
    """Items a per-item rule denied: a request holding only them, and the error they are answered with."""
    request: object
    code: int


@dataclass(frozen=True)
class Authorized:
    """What the handler is given: the request (only its permitted items) and the grants its in-handler
    checks consult; and the refused items to answer after it."""
    request: object
    grants: Grants
    refusals: tuple[Refusal, ...] = ()


def request_check(broker: BrokerContext, principal: str, host: str) -> Check:
    return Check(broker.security.authorizer, principal, host, broker.topics.by_id)


def authorize(broker: BrokerContext, access: Access, principal: str, host: str, version: int,
              request) -> Authorized:
    """Apply ``access`` to a request. Raises the *_AUTHORIZATION_FAILED error when the request as a whole
    is denied."""
    check = request_check(broker, principal, host)
    grants = Grants(check, access.in_handler) if access.in_handler else ALL_GRANTED
    if access.whole is not None:
        for need in access.whole(request, version):
            if not need.allowed(check):
                raise ERROR_FOR[need.resource_type](MESSAGE_FOR[need.resource_type])
    rule = access.items
    if rule is None or (rule.max_version is not None and version > rule.max_version):
        return Authorized(request, grants)
    attr = rule.items(version)
    items = getattr(request, attr, None)
    if not items:
        return Authorized(request, grants)
    permitted, denied = [], {}
    for item in items:
        if rule.allowed(check, item):
            permitted.append(item)
        else:
            denied.setdefault(rule.denied_code(item), []).append(item)
    if not denied:
        return Authorized(request, grants)
    refusals = tuple(Refusal(with_items(request, version, attr, d), code) for code, d in denied.items())
    return Authorized(with_items(request, version, attr, permitted), grants, refusals)


def with_items(request, version: int, attr: str, items: list):
    """A new request of the same message class and version, with ``attr`` holding ``items``."""
    values = {f.name: getattr(request, f.name) for f in request.fields.values() if f.for_version_q(version)}
    values[attr] = items
    return type(request)(version=version, **values)


def merge_refused(access: Access, version: int, response, refused_response) -> None:
    """Append the refused items' answers to the handler's response."""
    attr = access.items.response(version)
    getattr(response, attr).extend(getattr(refused_response, attr))


def listed(broker: BrokerContext, access: Access, principal: str, host: str, response):
    """The response of a listing with only what the principal may describe, a new message."""
    rule = access.listing
    check = request_check(broker, principal, host)
    version = response.version
    values = {f.name: getattr(response, f.name) for f in response.fields.values()
              if version is None or f.for_version_q(version)}
    values[rule.response] = [item for item in values[rule.response] if rule.visible(check, item)]
    return type(response)(version=version, **values)


