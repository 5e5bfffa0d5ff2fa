"""``tidelake broker start``: run a broker in the foreground until SIGTERM/SIGINT."""
from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.values import parse_pairs
from tidelake.errors import KafkaApiError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

def _host_port(value: str, option: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}", param_hint=option)
    return host or "0.0.0.0", int(port)


@click.group(cls=CommandGroup)
def broker() -> None:
    """Run the Kafka-compatible broker."""


@broker.command("start")
@click.option("--data-dir", default=None, type=click.Path(file_okay=False),
              help="Directory for the logs (default: log.dirs from --config).")
@click.option("--listen", default="127.0.0.1:9092", show_default=True, help="HOST:PORT to listen on.")
@click.option("--advertised", default=None, help="HOST:PORT clients are told to connect to.")
@click.option("--config", "config_file", default=None, type=click.Path(exists=True, dir_okay=False),
              help="server.properties file (Kafka config names).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override one config; repeatable.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="INFO", show_default=True)
def start(data_dir: str | None, listen: str, advertised: str | None, config_file: str | None, overrides: tuple[str, ...],
          log_level: str) -> None:
    """Start a broker in the foreground; SIGTERM/SIGINT flush and close the logs, then exit 0."""
    from tidelake.broker.config import BrokerConfig
    from tidelake.broker.embedded import new_event_loop
    from tidelake.broker.server import Broker

    logging.basicConfig(stream=sys.stderr, level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, port = _host_port(listen, "--listen")
    adv_host, adv_port = _host_port(advertised, "--advertised") if advertised else (None, None)
    sets = parse_pairs(overrides, "--set")
    try:
        config = BrokerConfig.from_file(config_file, sets)
    except (KafkaApiError, ValueError) as e:
        raise CliError(f"bad configuration{' in ' + config_file if config_file else ''}: {e}") from e
    if data_dir is None:
        log_dirs = config.get("log.dirs")
        if not log_dirs:
            raise click.UsageError("--data-dir is required (or log.dirs in --config)")
        data_dir = log_dirs.split(",")[0].strip()

    async def main() -> None:
        b = Broker(data_dir, config, host=host, port=port, advertised_host=adv_host, advertised_port=adv_port)
        await b.start()
        # Everything loaded so far (protocol schemas, configs, recovered logs) lives as long as the
        # process: keep it out of the cyclic GC's generations so collections stay short (tail latency).
        gc.freeze()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"tidelake broker listening on {b.host}:{b.port}", file=sys.stderr, flush=True)
        await stop.wait()
        logging.getLogger("tidelake.broker").info("signal received: flushing and closing logs")
        await b.stop()

    loop = new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
