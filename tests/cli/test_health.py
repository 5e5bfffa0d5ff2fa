"""`tidelake broker status --url` and `tidelake pipeline health --url`: one line from a metrics listener's
/health endpoints, exit 0 when ready, 1 when not ready or unreachable (the real command, its own process)."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from conftest import free_port, wait_port
from tidelake.broker import EmbeddedBroker
from tidelake.observability.pipeline_observer import PipelineObserver
from tidelake.observability.pipeline_stats import PipelineStats


def tl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("health"), config={"metrics.listen": "127.0.0.1:0"}) as b:
        yield b


def test_broker_status_ready(broker):
    proc = tl("broker", "status", "--url", broker.metrics_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("ready: data_dir: data directory loaded; coordinators: coordinators loaded; "
                           "listeners: listeners serving\n")
    live = tl("broker", "status", "--url", broker.metrics_url, "--live")
    assert live.returncode == 0 and live.stdout == "live: event_loop: event loop answers\n"


def test_pipeline_health_not_ready_before_its_first_batch():
    observer = PipelineObserver("127.0.0.1", 0, PipelineStats(batch_interval=1.0), pipeline="p", topic="t").start()
    try:
        proc = tl("pipeline", "health", "--url", observer.url)
        assert proc.returncode == 1
        assert proc.stdout == "not ready: batches: no batch committed yet\n"
        assert proc.stderr == ""
        observer.stats.pass_done({0: 0})
        proc = tl("pipeline", "health", "--url", observer.url)
        assert proc.returncode == 0 and proc.stdout.startswith("ready: batches: last batch committed ")
    finally:
        observer.stop()


def test_unreachable_listener_is_one_error_line():
    url = f"http://127.0.0.1:{free_port()}"
    proc = tl("broker", "status", "--url", url)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"tidelake: error: cannot reach {url}/health/ready: ")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_metrics_listen_option_is_checked(tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text(tl("pipeline", "example").stdout)
    proc = tl("pipeline", "run", str(config), "--metrics-listen", "9404")
    assert proc.returncode == 2
    assert proc.stderr == ("tidelake: error: Invalid value for --metrics-listen: expected HOST:PORT, got '9404' "
                           "(see 'tidelake pipeline run --help')\n")


def test_broker_start_serves_metrics_listen(tmp_path):
    port, metrics_port = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tidelake.cli.main", "broker", "start", "--data-dir",
                             str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}", "--set",
                             f"metrics.listen=127.0.0.1:{metrics_port}", "--log-level", "WARNING"],
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_port(port, 60)
        url = f"http://127.0.0.1:{metrics_port}"
        for _ in range(20):  # the Kafka port accepts a moment before the broker calls itself ready
            status = tl("broker", "status", "--url", url)
            if status.returncode == 0:
                break
        assert status.returncode == 0 and status.stdout.startswith("ready: "), status.stdout + status.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert f"tidelake broker metrics on {url}/metrics" in err
    down = tl("broker", "status", "--url", url)  # stopped with the broker
    assert down.returncode == 1 and down.stderr.startswith("tidelake: error: cannot reach ")
