"""Request handlers by domain; importing this package registers every one of them in
``tidelake.broker.registry.REGISTRY``."""
from tidelake.broker.handlers import admin, configs, data_plane, groups, metadata, transactions

__all__ = ["admin", "configs", "data_plane", "groups", "metadata", "transactions"]
