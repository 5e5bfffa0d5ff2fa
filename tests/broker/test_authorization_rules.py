"""Every API is declared once with an authorization rule, and each rule names fields the specs have, at every
version it is applied to."""
from __future__ import annotations

import pytest

from tidelake.broker import handlers  # noqa: F401 (declares every API)
from tidelake.broker.access import Access, Grants, HandlerCheck, open_to_all
from tidelake.broker.registry import REGISTRY, api, api_versions_response
from tidelake.security.acl.model import Operation, ResourceType


def _fields(struct, version: int) -> set[str]:
    return {f.name for f in struct._fields if f.for_version_q(version)}


def test_every_advertised_api_has_one_declaration_with_a_rule():
    advertised = {k.api_key for k in api_versions_response(3).api_keys}
    assert advertised == set(REGISTRY)
    for key in advertised:
        decl = REGISTRY[key]
        assert decl.api_key == key and isinstance(decl.access, Access), decl.name
        checked = (decl.access.whole, decl.access.items, decl.access.listing) != (None, None, None) or \
            decl.access.in_handler
        assert bool(checked) != bool(decl.access.open_because), decl.name


def test_a_second_declaration_of_an_api_is_refused():
    first = REGISTRY[18]
    with pytest.raises(ValueError, match="declared twice"):
        api(first.request_cls, first.response_cls, access=open_to_all("test"))(first.handler)
    assert REGISTRY[18] is first


def test_a_rule_either_checks_or_says_why_not():
    with pytest.raises(ValueError):
        Access()


def test_item_rules_name_real_fields():
    for key, decl in REGISTRY.items():
        rule = decl.access.items
        if rule is not None:
            last = decl.max_version if rule.max_version is None else min(decl.max_version, rule.max_version)
            for v in range(decl.min_version, last + 1):
                assert rule.items(v) in _fields(decl.request_cls._struct, v), (decl.name, v)
                assert rule.response(v) in _fields(decl.response_cls._struct, v), (decl.name, v)
        listing = decl.access.listing
        if listing is not None:
            assert all(listing.response in _fields(decl.response_cls._struct, v)
                       for v in range(decl.min_version, decl.max_version + 1))


def test_whole_request_rules_read_real_fields():
    """Each rule runs on a default-built request of every served version without an AttributeError."""
    for key, decl in REGISTRY.items():
        if decl.access.whole is None or key in (0, 1):  # Produce/Fetch: hand-decoded, see tests/broker/test_security_acls
            continue
        for v in range(decl.min_version, decl.max_version + 1):
            request = decl.request_cls.decode(decl.request_cls(version=v).encode(version=v), version=v)
            for need in decl.access.whole(request, v):
                assert need.operation and need.resource_type, (decl.name, v)


def test_a_handler_may_only_apply_checks_its_declaration_makes():
    declared = HandlerCheck(Operation.READ, ResourceType.TOPIC)
    grants = Grants(None, frozenset({declared}))
    assert grants.permits(declared, "t")
    with pytest.raises(LookupError):
        grants.permits(HandlerCheck(Operation.WRITE, ResourceType.TOPIC), "t")
