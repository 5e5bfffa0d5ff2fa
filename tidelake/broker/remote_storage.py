"""Tiered storage from the broker's configs: remote.log.storage.system.enable, remote.log.storage.url and
its S3 options (remote.log.storage.endpoint, .region, ...: a table storage's options), and the
remote log manager's and reader's settings. A mistake is one ConfigError line at start."""
from __future__ import annotations

from tidelake.broker.config import BrokerConfig
from tidelake.broker.config_definitions import ConfigError
from tidelake.log.remote import RemoteLogManager, RemoteLogSettings
from tidelake.storage import StorageError, open_storage
from tidelake.storage.objects import S3_OPTIONS

OPTION_PREFIX = "remote.log.storage."


def remote_log_manager(config: BrokerConfig) -> RemoteLogManager | None:
    """The broker's RemoteLogManager, None unless remote.log.storage.system.enable=true."""
    if not config.get_bool("remote.log.storage.system.enable"):
        return None
    url = config.get("remote.log.storage.url")
    if not url:
        raise ConfigError("remote.log.storage.system.enable=true needs remote.log.storage.url "
                          "(s3://bucket/prefix, or a path)")
    options = {name: config.get(OPTION_PREFIX + name) for name in S3_OPTIONS}
    options = {name: value for name, value in options.items() if value}
    try:
        storage = open_storage(url, options)
    except (ValueError, StorageError) as e:
        raise ConfigError(f"remote.log.storage.url={url}: {e}") from None
    settings = RemoteLogSettings(
        url, options, task_interval_ms=config.get_int("remote.log.manager.task.interval.ms"),
        index_cache_bytes=config.get_int("remote.log.index.file.cache.total.size.bytes"),
        reader_cache_bytes=config.get_int("remote.log.reader.cache.bytes"),
        list_offsets_timeout_ms=config.get_int("remote.list.offsets.request.timeout.ms"))
    return RemoteLogManager(storage, settings)
