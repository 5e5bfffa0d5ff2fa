"""The per-API authorization table names fields the specs have, at every version it is applied to."""
from __future__ import annotations

from tidelake.broker import handlers  # noqa: F401 (registers every handler)
from tidelake.broker.authorization import _ITEMS_MAX_VERSION, ITEMS, LISTINGS, WHOLE
from tidelake.broker.registry import REGISTRY


def _fields(struct, version: int) -> set[str]:
    return {f.name for f in struct._fields if f.for_version_q(version)}


def test_item_rules_name_real_fields():
    for key, rule in ITEMS.items():
        spec = REGISTRY[key]
        for v in range(spec.min_version, min(spec.max_version, _ITEMS_MAX_VERSION.get(key, spec.max_version)) + 1):
            assert rule.items(v) in _fields(spec.request_cls._struct, v), (spec.name, v)
            assert rule.response(v) in _fields(spec.response_cls._struct, v), (spec.name, v)
    for key, (attr, _visible) in LISTINGS.items():
        spec = REGISTRY[key]
        assert all(attr in _fields(spec.response_cls._struct, v) for v in range(spec.min_version, spec.max_version + 1))


def test_whole_request_rules_read_real_fields():
    """Each rule runs on a default-built request of every served version without an AttributeError."""
    for key, needs in WHOLE.items():
        spec = REGISTRY[key]
        for v in range(spec.min_version, spec.max_version + 1):
            request = spec.request_cls.decode(spec.request_cls(version=v).encode(version=v), version=v)
            for op, rtype, name in needs(request, v):
                assert op and rtype and (name is None or isinstance(name, str)), (spec.name, v)
