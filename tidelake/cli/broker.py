"""``tidelake broker start``: run a broker in the foreground until SIGTERM/SIGINT."""
from __future__ import annotations

import asyncio
import gc
import logging
import sys

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.health import live_option, report_health, url_option
from tidelake.cli.signals import on_stop_signals
from tidelake.cli.values import parse_pairs

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

@click.group(cls=CommandGroup)
def broker() -> None:
    """Run the Kafka-compatible broker."""


@broker.command("start")
@click.option("--data-dir", default=None, type=click.Path(file_okay=False),
              help="Directory for the logs (default: log.dirs from --config).")
@click.option("--listen", default=None, help="HOST:PORT to listen on  [default: listeners from --config, else "
              "127.0.0.1:9092]")
@click.option("--advertised", default=None, help="HOST:PORT clients are told to connect to.")
@click.option("--config", "config_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="server.properties file (Kafka config names).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override one config; repeatable.")
@click.option("--broker-id", type=int, default=None, help="This broker's id (broker.id) in a cluster.")
@click.option("--zookeeper", default=None, metavar="HOST:PORT",
              help="Join the cluster kept in this ZooKeeper (zookeeper.connect).")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="INFO", show_default=True)
def start(data_dir: str | None, listen: str, advertised: str | None, config_file: str | None, overrides: tuple[str, ...],
          broker_id: int | None, zookeeper: str | None, log_level: str) -> None:
    """Start a broker in the foreground; SIGTERM/SIGINT flush and close the logs, then exit 0 (a second one:
    exit 130 at once, as a crash the next start recovers from).

    With --zookeeper (or zookeeper.connect) the broker is one of a replicated cluster: each broker
    needs its own --broker-id, port and data directory."""
    from tidelake.broker.config import BrokerConfig, advertised_address, listen_address
    from tidelake.broker.config_definitions import ConfigError
    from tidelake.broker.allocator import keep_large_buffers
    from tidelake.broker.embedded import new_event_loop
    from tidelake.broker.server import Broker
    from tidelake.cluster.zk_store import ZooKeeperUnavailable

    logging.basicConfig(stream=sys.stderr, level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sets = parse_pairs(overrides, "--set")
    if broker_id is not None:
        sets["broker.id"] = str(broker_id)
    if zookeeper is not None:
        sets["zookeeper.connect"] = zookeeper
    try:
        config = BrokerConfig.from_file(config_file, sets)
        host, port = listen_address(config, listen)
        adv_host, adv_port = advertised_address(config, advertised)
    except ConfigError as e:  # the message names the key and where it came from
        raise CliError(f"bad configuration: {e}") from e
    if data_dir is None:
        log_dirs = config.get("log.dirs")
        if not log_dirs:
            raise click.UsageError("--data-dir is required (or log.dirs in --config)")
        data_dir = log_dirs.split(",")[0].strip()

    keep_large_buffers()  # this process is the broker: tune malloc for its request frames

    async def main() -> None:
        b = Broker(data_dir, config, host=host, port=port, advertised_host=adv_host, advertised_port=adv_port)
        try:
            await b.start()
        except (ZooKeeperUnavailable, ConfigError) as e:
            raise CliError(str(e)) from None
        # Everything loaded so far (protocol schemas, configs, recovered logs) lives as long as the
        # process: keep it out of the cyclic GC's generations so collections stay short (tail latency).
        gc.freeze()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        # (from a signal handler: call_soon_threadsafe wakes the loop through its self-pipe)
        on_stop_signals(lambda: loop.call_soon_threadsafe(stop.set))
        print(f"tidelake broker listening on {b.host}:{b.port}", file=sys.stderr, flush=True)
        if b.metrics_url:
            print(f"tidelake broker metrics on {b.metrics_url}/metrics", file=sys.stderr, flush=True)
        if b.schema_registry.url:
            print(f"tidelake schema registry on {b.schema_registry.url}", file=sys.stderr, flush=True)
        await stop.wait()
        logging.getLogger("tidelake.broker").info("signal received: flushing and closing logs")
        await b.stop()

    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


@broker.command("status")
@url_option
@live_option
@click.option("--timeout", type=click.FloatRange(min=0.1), default=5.0, show_default=True, metavar="SECONDS")
def status(url: str, live: bool, timeout: float) -> None:
    """Whether a broker is ready (data directory and coordinators loaded, listeners serving), read from its
    metrics listener (metrics.listen): one line; exit 0 when ready, 1 when not."""
    report_health(url, live, timeout)
