"""``tidelake cluster start|status|restart-broker``: a local replicated cluster (ZooKeeper + N brokers) in the
foreground, what its ZooKeeper says about it (brokers, controller, partitions not fully in sync), and one of its
brokers restarted by the ``cluster start`` that owns it.

Directories are made absolute here, where the command reads them: ZooKeeper runs in a working directory of its
own, and a relative path in its zoo.cfg would name another place."""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.cli.output import json_option, print_json, print_rows
from tidelake.cli.values import parse_pairs

RESTART_POLL_S = 0.5  # how often `cluster start` looks for restart requests and exited brokers


@click.group(cls=CommandGroup)
def cluster() -> None:
    """Run and inspect a local replicated cluster (Kafka's ZooKeeper mode)."""


@cluster.command("start")
@click.option("--brokers", type=click.IntRange(min=1, max=50), default=3, show_default=True,
              help="Number of brokers (ids 1..N).")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False, resolve_path=True, path_type=Path),
              help="Root directory: zookeeper/, broker-<id>/ logs, cluster.json.")
@click.option("--base-port", type=click.IntRange(min=0, max=65535), default=9092, show_default=True,
              help="Broker <id> listens on base-port + id - 1 (0: free ports).")
@click.option("--zookeeper-port", type=click.IntRange(min=0, max=65535), default=2181, show_default=True,
              help="ZooKeeper's client port on 127.0.0.1 (0: a free port).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker config for every broker (e.g. default.replication.factor=3); repeatable.")
def start(brokers: int, data_dir: Path, base_port: int, zookeeper_port: int, overrides: tuple[str, ...]) -> None:
    """Start ZooKeeper and BROKERS brokers on 127.0.0.1, in the foreground; Ctrl-C (or SIGTERM) stops them all."""
    from tidelake.cluster.local_cluster import LocalCluster
    from tidelake.cluster.restart_requests import take_restart_requests
    from tidelake.cluster.zookeeper_server import ZooKeeperNotInstalled

    sets = parse_pairs(overrides, "--set")
    local = LocalCluster(data_dir, brokers, zookeeper_port=zookeeper_port or None, base_port=base_port or None,
                         configs=sets)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        local.start()
    except ZooKeeperNotInstalled as e:
        raise CliError(str(e)) from None
    except (RuntimeError, TimeoutError) as e:
        raise CliError(f"cluster did not start: {e}") from None
    try:
        click.echo(f"ZooKeeper on {local.zookeeper.connect_string}", err=True)
        for b in local.brokers.values():
            click.echo(f"broker {b.broker_id} on {b.bootstrap} (pid {b.pid}, log {b.log_path})", err=True)
        click.echo(f"bootstrap servers: {local.bootstrap_servers}   (Ctrl-C stops the cluster)", err=True)
        click.echo(f"restart a broker: tidelake cluster restart-broker ID --data-dir {data_dir} [--kill]", err=True)
        reported: set[int] = set()
        while not stop.wait(RESTART_POLL_S):
            for request in take_restart_requests(data_dir):
                if request.broker_id not in local.brokers:
                    continue
                click.echo(f"restarting broker {request.broker_id} ({'SIGKILL' if request.kill else 'SIGTERM'})",
                           err=True)
                try:
                    b = local.restart_broker(request.broker_id, kill=request.kill)
                except (RuntimeError, TimeoutError) as e:
                    click.echo(f"broker {request.broker_id} did not restart: {e}", err=True)
                    continue
                reported.discard(b.broker_id)
                click.echo(f"broker {b.broker_id} on {b.bootstrap} (pid {b.pid}, log {b.log_path})", err=True)
            for b in local.brokers.values():
                if not b.alive() and b.broker_id not in reported:
                    reported.add(b.broker_id)
                    click.echo(f"broker {b.broker_id} exited ({b.process.returncode}); see {b.log_path}", err=True)
    finally:
        click.echo("stopping the brokers, then ZooKeeper", err=True)
        local.stop()


@cluster.command("status")
@click.option("--data-dir", type=click.Path(file_okay=False, resolve_path=True, path_type=Path), default=None,
              help="A directory of `cluster start` (its cluster.json names the ZooKeeper).")
@click.option("--zookeeper", default=None, metavar="HOST:PORT", help="The cluster's ZooKeeper (zookeeper.connect).")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to reach ZooKeeper.")
@json_option
def status(data_dir: Path | None, zookeeper: str | None, timeout: float, as_json: bool) -> None:
    """Live brokers, the controller, and partitions that are offline, under-replicated or being reassigned."""
    from tidelake.cluster.local_cluster import STATE_FILE
    from tidelake.cluster.zk_store import ClusterStore, ZooKeeperUnavailable

    if zookeeper is None:
        if data_dir is None:
            raise click.UsageError("give --zookeeper HOST:PORT or --data-dir of a `cluster start`")
        state = data_dir / STATE_FILE
        if not state.exists():
            raise CliError(f"{state} not found: is {data_dir} the --data-dir of `tidelake cluster start`?")
        zookeeper = json.loads(state.read_text())["zookeeper"]
    store = ClusterStore(zookeeper, connection_timeout_ms=int(timeout * 1000))
    try:
        store.start()
    except ZooKeeperUnavailable as e:
        raise CliError(str(e)) from None
    try:
        controller = store.controller_id()
        brokers = []
        for bid in store.live_broker_ids():
            reg = store.broker(bid)
            if reg is not None:
                brokers.append({"id": bid, "endpoints": [ep.connection_string for ep in reg.endpoints],
                                "controller": bid == controller})
        live = {b["id"] for b in brokers}
        partitions, offline, under, moving = 0, [], [], []
        for topic in store.topic_names():
            assignment = store.topic_assignment(topic)
            if assignment is None:
                continue
            for p, replicas in sorted(assignment.partitions.items()):
                partitions += 1
                st = store.partition_state(topic, p)
                row = {"topic": topic, "partition": p, "leader": st.leader if st else -1, "replicas": replicas,
                       "isr": st.isr if st else []}
                if assignment.reassigning(p):  # KIP-455: replicas = target + original while it moves
                    row = {**row, "adding": assignment.adding.get(p, []), "removing": assignment.removing.get(p, [])}
                    moving.append(row)
                if st is None or st.leader not in live:
                    offline.append(row)
                elif len(st.isr) < len(replicas) and not assignment.reassigning(p):
                    under.append(row)
        doc = {"zookeeper": zookeeper, "controller": controller, "controller_epoch": store.controller_epoch(),
               "brokers": brokers, "partitions": partitions, "offline": offline, "under_replicated": under,
               "reassigning": moving}
    finally:
        store.stop()
    if as_json:
        print_json(doc)
        return
    click.echo(f"ZooKeeper {zookeeper}: controller {controller} (epoch {doc['controller_epoch']}), "
               f"{len(brokers)} live broker(s), {partitions} partition(s), {len(offline)} offline, "
               f"{len(under)} under-replicated, {len(moving)} being reassigned")
    print_rows(("BROKER", "ENDPOINTS", "CONTROLLER"),
               [(b["id"], " ".join(b["endpoints"]), "yes" if b["controller"] else "") for b in brokers],
               right=("BROKER",))
    if offline or under or moving:
        print_rows(("TOPIC", "PARTITION", "STATE", "LEADER", "REPLICAS", "ISR", "ADDING", "REMOVING"),
                   [(r["topic"], r["partition"], state, r["leader"], ",".join(map(str, r["replicas"])),
                     ",".join(map(str, r["isr"])), ",".join(map(str, r.get("adding", []))),
                     ",".join(map(str, r.get("removing", []))))
                    for state, rows in (("offline", offline), ("under-replicated", under), ("reassigning", moving))
                    for r in rows],
                   right=("PARTITION", "LEADER"))
    sys.stdout.flush()


@cluster.command("restart-broker")
@click.argument("broker_id", type=click.IntRange(min=1))
@click.option("--data-dir", required=True, type=click.Path(file_okay=False, resolve_path=True, path_type=Path),
              help="The --data-dir of the running `cluster start` (it owns the broker processes).")
@click.option("--kill", is_flag=True, help="SIGKILL the broker (a crash) instead of SIGTERM (controlled shutdown).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds to wait for the broker to listen again.")
def restart_broker(broker_id: int, data_dir: Path, kill: bool, timeout: float) -> None:
    """Stop broker BROKER_ID of a running `cluster start` and start it again (same id, port, data directory):
    the `cluster start` does it, so the new process is its child and Ctrl-C still stops it."""
    from tidelake.cluster.local_cluster import STATE_FILE
    from tidelake.cluster.restart_requests import RestartRequest, request_restart

    state = data_dir / STATE_FILE
    if not state.exists():
        raise CliError(f"{state} not found: is {data_dir} the --data-dir of a running `tidelake cluster start`?")

    def broker_pids() -> tuple[int | None, dict[int, int | None]]:
        doc = json.loads(state.read_text())
        return doc.get("owner_pid"), {b["id"]: b["pid"] for b in doc["brokers"]}
    owner, pids = broker_pids()
    if broker_id not in pids:
        raise CliError(f"{state} has no broker {broker_id} (brokers: {', '.join(map(str, sorted(pids)))})")
    if owner is None or not _running(owner):
        raise CliError(f"the `tidelake cluster start` of {data_dir} is not running (pid {owner}): start it again")
    before = pids[broker_id]
    request = request_restart(data_dir, RestartRequest(broker_id, kill))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(RESTART_POLL_S / 2)
        owner, pids = broker_pids()
        pid = pids.get(broker_id)
        if pid is not None and pid != before and _running(pid):
            click.echo(f"broker {broker_id} restarted (pid {pid})")
            return
        if not _running(owner):
            break
    request.unlink(missing_ok=True)
    raise CliError(f"broker {broker_id} did not listen again within {timeout:g} s (--timeout); "
                   f"see {data_dir / f'broker-{broker_id}.log'} and the output of `tidelake cluster start`")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True
