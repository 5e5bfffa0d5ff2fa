"""Request handlers by domain; importing this package registers every one of them in
``tidelake.broker.registry.REGISTRY``."""
from tidelake.broker.handlers import (acls, admin, client_quotas, cluster, configs, data_plane, features, groups,
                                     metadata, quorum, sasl, share_fetch, share_groups, share_state, streams_groups,
                                     transactions)

__all__ = ["acls", "admin", "client_quotas", "cluster", "configs", "data_plane", "features", "groups", "metadata",
           "quorum", "sasl", "share_fetch", "share_groups", "share_state", "streams_groups", "transactions"]
