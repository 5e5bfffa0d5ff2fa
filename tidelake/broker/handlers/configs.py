"""Configs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics, this broker and its
loggers. Names, defaults, synonyms and validation are ``tidelake.broker.config``'s.

The broker resource named "" is Kafka's cluster-wide default entity (``kafka-configs --entity-type brokers
--entity-default``): its dynamic values back every broker config this broker does not set dynamically itself
(DYNAMIC_DEFAULT_BROKER_CONFIG); describing it lists only them, as Kafka does. In a cluster each broker keeps the
defaults set through it (like its own dynamic configs, in its metadata file), not ZooKeeper's shared
``/config/brokers/<default>``."""
from __future__ import annotations

from kafka.protocol.admin import (AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest,
                                  DescribeConfigsResponse, IncrementalAlterConfigsRequest,
                                  IncrementalAlterConfigsResponse)

from tidelake import errors
import tidelake.broker.config_definitions as cfg
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.errors import error_code
from tidelake.broker.access import config_resource, config_resource_denied, per_item
from tidelake.security.acl.model import Operation
from tidelake.broker.registry import api
from tidelake.coordinator.group_resource_configs import CONSUMER_GROUP_CONFIGS, GROUP_CONFIG_NAMES, consumer_group_value
from tidelake.coordinator.share_config import SHARE_GROUP_CONFIGS

NONE = errors.NONE
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32  # a group's configs: KIP-848's consumer.* and KIP-932's share.*
GROUP_CONFIG_SOURCE, DEFAULT_CONFIG_SOURCE = 8, 5  # Kafka's ConfigSource ids
_CONFIG_TYPE = {int: 3, str: 2}  # Kafka's ConfigType ids (INT, STRING)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations

_DCRResult = DescribeConfigsResponse.DescribeConfigsResult
_DCREntry = _DCRResult.DescribeConfigsResourceResult
_DCRSynonym = _DCREntry.DescribeConfigsSynonym


def _is_this_broker(broker: BrokerContext, name: str) -> bool:
    return name == str(broker.node_id)


CLUSTER_DEFAULT = ""  # the broker resource of the cluster-wide dynamic defaults


@api(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4,
     access=per_item("resources", "results", config_resource(Operation.DESCRIBE_CONFIGS), config_resource_denied))
async def describe_configs(broker: BrokerContext, ctx: RequestContext, request):
    version = ctx.api_version
    with_synonyms = bool(request.include_synonyms)
    with_docs = bool(request.include_documentation) if version >= 3 else False
    results = []
    for r in request.resources:
        keys = r.configuration_keys
        try:
            if r.resource_type == RESOURCE_TOPIC:
                info = broker.topics.get(r.resource_name)
                if info is None:
                    raise errors.UnknownTopicOrPartition(f"Topic {r.resource_name} does not exist")
                entries = broker.config.describe_topic(info.configs, keys, with_synonyms)
            elif r.resource_type == RESOURCE_BROKER and r.resource_name == CLUSTER_DEFAULT:
                entries = broker.config.describe_dynamic_defaults(keys)
            elif r.resource_type == RESOURCE_BROKER:
                if not _is_this_broker(broker, r.resource_name):
                    raise errors.InvalidRequest(f"unknown broker {r.resource_name}")
                entries = broker.config.describe(keys, with_synonyms)
            elif r.resource_type == RESOURCE_BROKER_LOGGER:
                entries = []
            elif r.resource_type == RESOURCE_GROUP:
                results.append(_group_configs(broker, r.resource_name, keys, with_synonyms, with_docs))
                continue
            else:
                raise errors.InvalidRequest(f"unsupported resource type {r.resource_type}")
        except Exception as e:
            results.append(_DCRResult(error_code=error_code(e), error_message=str(e), resource_type=r.resource_type,
                                      resource_name=r.resource_name, configs=[]))
            continue
        configs = [_DCREntry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                             is_default=e.is_default, is_sensitive=e.sensitive,
                             synonyms=[_DCRSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms],
                             config_type=e.type, documentation=e.doc if with_docs else None)
                   for e in entries]
        results.append(_DCRResult(error_code=NONE, error_message=None, resource_type=r.resource_type,
                                  resource_name=r.resource_name, configs=configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _group_configs(broker: BrokerContext, group_id: str, keys, with_synonyms: bool, with_docs: bool):
    """A group's configs: its own values, else the broker's (``group.<name>``, its synonym) or Kafka's default."""
    overrides = broker.share_groups.group_configs.get(group_id, {})
    share = broker.share_groups.config_for(group_id)
    configs = []
    for name in GROUP_CONFIG_NAMES:
        if keys and name not in keys:
            continue
        if name in CONSUMER_GROUP_CONFIGS:
            value, kind, doc = consumer_group_value(broker.groups.config, overrides, name), int, \
                CONSUMER_GROUP_CONFIGS[name].doc
        else:
            d = SHARE_GROUP_CONFIGS[name]
            value, kind, doc = getattr(share, d.field), d.parse, d.doc
        own = name in overrides
        synonyms = []
        if with_synonyms:
            if own:
                synonyms.append(_DCRSynonym(name=name, value=overrides[name], source=GROUP_CONFIG_SOURCE))
            broker_name = "group." + name
            if broker_name in cfg.BROKER_CONFIGS:
                broker_value, source = broker.config.lookup(broker_name)
                synonyms.append(_DCRSynonym(name=broker_name, value=broker_value, source=source))
        configs.append(_DCREntry(name=name, value=str(value), read_only=False,
                                 config_source=GROUP_CONFIG_SOURCE if own else DEFAULT_CONFIG_SOURCE,
                                 is_default=not own, is_sensitive=False, synonyms=synonyms,
                                 config_type=_CONFIG_TYPE[kind], documentation=doc if with_docs else None))
    return _DCRResult(error_code=NONE, error_message=None, resource_type=RESOURCE_GROUP, resource_name=group_id,
                      configs=configs)


def _apply_incremental(current: dict[str, str], ops, defaults) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations to a dict of overrides; ``defaults(name)`` gives the
    effective value APPEND/SUBTRACT start from when there is no override."""
    out = dict(current)
    seen = set()
    for c in ops:
        if c.name in seen:
            raise errors.InvalidRequest(f"config {c.name} appears more than once")
        seen.add(c.name)
        op = c.config_operation
        if op == SET:
            if c.value is None:
                raise errors.InvalidRequest(f"null value for {c.name}")
            out[c.name] = c.value
        elif op == DELETE:
            out.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            if not cfg.is_list_config(c.name):
                raise errors.InvalidConfig(f"{c.name} is not a list config; APPEND/SUBTRACT need one")
            base = out.get(c.name, defaults(c.name)) or ""
            items = [v for v in base.split(",") if v]
            values = [v.strip() for v in (c.value or "").split(",") if v.strip()]
            if op == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [v for v in items if v not in values]
            out[c.name] = ",".join(items)
        else:
            raise errors.InvalidRequest(f"unknown config operation {op}")
    return out


async def _alter(broker: BrokerContext, resource_type: int, resource_name: str, build_new, validate_only: bool
                 ) -> None:
    if resource_type == RESOURCE_TOPIC:
        info = broker.topics.get(resource_name)
        if info is None:
            raise errors.UnknownTopicOrPartition(f"Topic {resource_name} does not exist")
        new = build_new(dict(info.configs), lambda n: broker.config.topic_default(n)[0])
        await broker.topic_admin.alter_topic_configs(resource_name, new, validate_only=validate_only)
    elif resource_type == RESOURCE_BROKER:
        default = resource_name == CLUSTER_DEFAULT
        if not default and not _is_this_broker(broker, resource_name):
            raise errors.InvalidRequest(f"unknown broker {resource_name}")
        current = dict(broker.config.dynamic_default if default else broker.config.dynamic)
        new = build_new(current, lambda n: broker.config.get(n))
        changes = {k: v for k, v in new.items() if current.get(k) != v}
        changes.update({k: None for k in current if k not in new})
        for k, v in changes.items():
            broker.config.validate_dynamic(k, v)
        if not validate_only:
            broker.topics.set_dynamic_broker_configs(changes, default=default)
    elif resource_type == RESOURCE_BROKER_LOGGER:
        pass  # log levels: accepted, not applied
    elif resource_type == RESOURCE_GROUP:
        if not resource_name:
            raise errors.InvalidRequest("a group config resource names no group")
        new = build_new(dict(broker.share_groups.group_configs.get(resource_name, {})), lambda _n: None)
        await broker.group_config_admin.alter_group_configs(resource_name, new, validate_only=validate_only)
    else:
        raise errors.InvalidRequest(f"unsupported resource type {resource_type}")


_ACRResponse = AlterConfigsResponse.AlterConfigsResourceResponse


@api(AlterConfigsRequest, AlterConfigsResponse, 0, 2,
     access=per_item("resources", "responses", config_resource(Operation.ALTER_CONFIGS), config_resource_denied))
async def alter_configs(broker: BrokerContext, ctx: RequestContext, request):
    out = []
    for r in request.resources:
        try:
            values = {c.name: c.value for c in r.configs}
            if any(v is None for v in values.values()):
                raise errors.InvalidRequest("null config value")
            await _alter(broker, r.resource_type, r.resource_name, lambda cur, dflt: dict(values),
                         request.validate_only)
            out.append(_ACRResponse(error_code=NONE, error_message=None, resource_type=r.resource_type,
                                    resource_name=r.resource_name))
        except Exception as e:
            out.append(_ACRResponse(error_code=error_code(e), error_message=str(e), resource_type=r.resource_type,
                                    resource_name=r.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)


_IACRResponse = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


@api(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1,
     access=per_item("resources", "responses", config_resource(Operation.ALTER_CONFIGS), config_resource_denied))
async def incremental_alter_configs(broker: BrokerContext, ctx: RequestContext, request):
    out = []
    for r in request.resources:
        try:
            await _alter(broker, r.resource_type, r.resource_name,
                         lambda cur, dflt, ops=r.configs: _apply_incremental(cur, ops, dflt), request.validate_only)
            out.append(_IACRResponse(error_code=NONE, error_message=None, resource_type=r.resource_type,
                                     resource_name=r.resource_name))
        except Exception as e:
            out.append(_IACRResponse(error_code=error_code(e), error_message=str(e), resource_type=r.resource_type,
                                     resource_name=r.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)
