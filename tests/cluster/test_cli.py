"""`tidelake cluster start|status` and `topics describe` against the cluster they start."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from cluster_fixtures import require_zookeeper, wait_until
from conftest import ROOT


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has exited
        return f.read().split()[2] != "Z"


def test_cluster_start_status_describe_and_ctrl_c_stops_everything(tmp_path):
    require_zookeeper()
    root = tmp_path / "local"
    proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "cluster", "start", "--brokers", "3",
                             "--data-dir", str(root), "--base-port", "0", "--zookeeper-port", "0",
                             "--set", "replica.lag.time.max.ms=2000"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state = root / "cluster.json"
    try:
        wait_until("cluster.json", state.exists, 90)
        doc = json.loads(state.read_text())
        bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in doc["brokers"])
        status = wait_until("three live brokers and a controller", lambda: (
            (s := json.loads(_cli("cluster", "status", "--data-dir", str(root), "--json").stdout))
            and len(s["brokers"]) == 3 and s["controller"] in (1, 2, 3) and s), 60)
        assert sum(b["controller"] for b in status["brokers"]) == 1
        r = _cli("topics", "create", "events", "--partitions", "3", "--replication-factor", "3",
                 "--config", "min.insync.replicas=2", "-b", bootstrap)
        assert r.returncode == 0, r.stderr
        described = wait_until("leaders for events", lambda: (
            (d := json.loads(_cli("topics", "describe", "events", "--json", "-b", bootstrap).stdout)[0])
            and all(p["leader"] > 0 for p in d["partitions"]) and d), 60)
        for p in described["partitions"]:
            assert sorted(p["replicas"]) == [1, 2, 3] and sorted(p["isr"]) == [1, 2, 3]
            assert p["leader"] == p["replicas"][0]
        assert {"name": "min.insync.replicas", "value": "2"}.items() <= next(
            c for c in described["configs"] if c["name"] == "min.insync.replicas").items()
        text = _cli("topics", "describe", "events", "-b", bootstrap).stdout
        assert "LEADER" in text and "REPLICAS" in text and "ISR" in text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(90)
    final = json.loads(state.read_text())
    pids = [b["pid"] for b in final["brokers"]] + [final["zookeeper_pid"]]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_cluster_status_without_a_cluster_is_one_clear_line(tmp_path):
    r = _cli("cluster", "status", "--data-dir", str(tmp_path))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cluster.json not found" in r.stderr


def test_cluster_commands_fail_in_one_line(tmp_path):
    from tidelake.cluster.zookeeper_server import free_port
    r = _cli("cluster", "status", "--zookeeper", f"127.0.0.1:{free_port()}", "--timeout", "1")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot connect to ZooKeeper" in r.stderr
    r = _cli("cluster", "start", "--brokers", "0", "--data-dir", str(tmp_path))
    assert r.returncode == 2 and "--brokers" in r.stderr and "Traceback" not in r.stderr
    r = _cli("cluster", "status")
    assert r.returncode == 2 and "--zookeeper" in r.stderr and "Traceback" not in r.stderr


def _start_in(cwd, data_dir: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "cluster", "start", "--brokers", "1",
                             "--data-dir", data_dir, "--base-port", "0", "--zookeeper-port", "0", *extra],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=90)
    return err


def test_cluster_start_with_a_relative_data_dir_runs_zookeeper_and_restarts_a_broker_on_request(tmp_path):
    require_zookeeper()
    proc = _start_in(tmp_path, "./cluster")  # the README's own line
    root = tmp_path / "cluster"
    state = root / "cluster.json"
    try:
        wait_until("cluster.json (or the command's exit)", lambda: state.exists() or proc.poll() is not None, 90)
        assert proc.poll() is None, _stop(proc)
        assert f"dataDir={root / 'zookeeper' / 'data'}" in (root / "zookeeper" / "zoo.cfg").read_text()
        before = json.loads(state.read_text())["brokers"][0]["pid"]
        r = _cli("cluster", "restart-broker", "1", "--data-dir", str(root))
        assert r.returncode == 0, r.stderr
        after = json.loads(state.read_text())["brokers"][0]["pid"]
        assert after != before and not _alive(before) and _alive(after)
        assert f"broker 1 restarted (pid {after})" in r.stdout
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err[-2000:]
    assert f"(pid {before}," in err and f"tidelake cluster restart-broker ID --data-dir {root}" in err


def test_restart_broker_without_a_running_cluster_start_is_one_clear_line(tmp_path):
    r = _cli("cluster", "restart-broker", "1", "--data-dir", str(tmp_path))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cluster.json not found" in r.stderr
