"""UpdateFeatures (API 57, KIP-584/KIP-778): what ``kafka-features upgrade|downgrade|disable`` and the Admin
client's ``updateFeatures`` send, checked as Kafka 4.x's controller checks it (``FeatureControlManager``): an
unknown upgrade type, a level below 0, a level the broker cannot run, a downgrade asked as an upgrade or an upgrade
asked as a downgrade are INVALID_UPDATE_VERSION with Kafka's message, and the first refused update refuses the
whole request; validate_only checks and changes nothing.

The levels are ``tidelake.broker.features``'s: ``transaction.version`` (0-2) is the one a broker alone can move,
kept in the metadata file (``MetadataStore.finalized_features``: it survives a restart and wins over the
``transaction.version`` config, as Kafka's finalized level in the metadata log wins over the format-time one; the
config APIs do not show it, as Kafka's do not show feature levels); ``group.version`` and ``share.version`` run at 1
only, and so does ``streams.version`` (advertised 0-1, as Kafka's, but streams groups cannot be turned off here:
a move is refused with the reason). In a cluster (ZooKeeper mode) the level is each broker's own config, and
brokers at different transaction versions would disagree on the protocol, so a change is refused there
(INVALID_UPDATE_VERSION naming the config to set on every broker)."""
from __future__ import annotations

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from tidelake import errors
from tidelake.broker.access import cluster_whole
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.features import TRANSACTION_VERSION, finalized_level, supported_levels
from tidelake.broker.registry import api
from tidelake.security.acl.model import Operation

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3  # Kafka's FeatureUpdate.UpgradeType codes


def _refusal(broker: BrokerContext, name: str, level: int, upgrade_type: int) -> str | None:
    """Why one update cannot be applied (Kafka's ``updateFeature`` checks, in its order), or None."""
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return "The controller does not support the given upgrade type."
    if level < 0:
        return "A feature version cannot be less than 0."
    levels = supported_levels(name)
    if levels is None or levels == (0, 0):
        return f"Local controller {broker.node_id} does not support this feature."
    if not levels[0] <= level <= levels[1]:
        return f"Local controller {broker.node_id} only supports versions {levels[0]}-{levels[1]}"
    current = finalized_level(broker.config, name)
    if level < current and upgrade_type == UPGRADE:
        return "Can't downgrade the version of this feature without setting the upgrade type to either safe or " \
               "unsafe downgrade."
    if level > current and upgrade_type != UPGRADE:
        return "Can't downgrade to a newer version."
    if level != current and name != TRANSACTION_VERSION:
        return f"tidelake runs {name} at level {current} only"
    if level != current and broker.config.get("zookeeper.connect"):
        return f"In a ZooKeeper cluster {name} is each broker's config: set {name}={level} on every broker"
    return None


@api(UpdateFeaturesRequest, UpdateFeaturesResponse, 0, 2, access=cluster_whole(Operation.ALTER))
async def update_features(broker: BrokerContext, ctx: RequestContext, request):
    version = ctx.api_version
    updates = []
    for u in request.feature_updates:
        # v0 had AllowDowngrade where v1 has UpgradeType (Kafka's UpdateFeaturesRequest.getFeature)
        upgrade_type = (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if version == 0 else u.upgrade_type
        updates.append((u.feature, u.max_version_level, upgrade_type))
    for name, level, upgrade_type in updates:
        reason = _refusal(broker, name, level, upgrade_type)
        if reason is not None:
            return UpdateFeaturesResponse(
                throttle_time_ms=0, error_code=errors.InvalidUpdateVersion.code, results=[],
                error_message="The update failed for all features since the following feature had an error: "
                              f"Invalid update version {level} for feature {name}. {reason}")
    validate_only = version >= 1 and request.validate_only
    changed = {name: level for name, level, _ in updates if level != finalized_level(broker.config, name)}
    if changed and not validate_only:
        for name, level in changed.items():   # only transaction.version can differ here (the others: 1-1)
            assert name == TRANSACTION_VERSION, name
            broker.config.finalized_features[name] = level
        broker.metadata.finalized_features = dict(broker.config.finalized_features)
        await broker.metadata.save_async()
    results = [UpdateFeaturesResponse.UpdatableFeatureResult(feature=name, error_code=errors.NONE, error_message=None)
               for name, _, _ in updates] if version <= 1 else []
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None, results=results)
