"""``tidelake schema-registry start``: serves until SIGTERM; a bad setting or an unreachable Kafka is one line."""
from __future__ import annotations

import subprocess
import sys
import time

from conftest import free_port
from schema_registry_fixtures import registry_process
from schema_registry_rest import Rest, record


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", "schema-registry", "start", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_serves_and_stops_on_sigterm(registry_broker):
    with registry_process(registry_broker.bootstrap_servers, {"schema.compatibility.level": "FULL"}) as (url, proc):
        assert Rest(url).get("/config").body == {"compatibilityLevel": "FULL"}
        assert Rest(url).register("cli-value", record("C", ("a", "int"))).status == 200
        proc.terminate()
        assert proc.wait(20) == 0


def test_an_unknown_setting_is_one_line():
    done = run_cli("--set", "schema.compatability.level=FULL")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "tidelake: error: --set: unknown setting 'schema.compatability.level' (did you mean "
        "schema.compatibility.level?) (tidelake schema-registry start)"]


def test_a_bad_value_is_one_line():
    done = run_cli("--set", "schema.compatibility.level=SIDEWAYS", "--log-level", "WARNING")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "schema.compatibility.level=SIDEWAYS" in done.stderr


def test_unreachable_kafka_fails_fast():
    started = time.monotonic()
    done = run_cli("-b", f"127.0.0.1:{free_port()}", "--set", "kafkastore.timeout.ms=2000", "--log-level", "WARNING")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach Kafka" in lines[0], done.stderr
    assert time.monotonic() - started < 30


def test_a_busy_port_is_one_line(registry_broker):
    with registry_process(registry_broker.bootstrap_servers) as (url, _proc):
        port = url.rsplit(":", 1)[1]
        done = run_cli("-b", registry_broker.bootstrap_servers, "--listen", f"http://127.0.0.1:{port}")
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
        assert "Address already in use" in done.stderr


def test_a_config_file_error_names_its_line(tmp_path):
    config = tmp_path / "schema-registry.properties"
    config.write_text("# registry\nlisteners=http://127.0.0.1:0\nkafkastore.topc=_schemas\n")
    done = run_cli("--config", str(config))
    assert done.returncode == 1
    assert f"{config}:3: unknown setting 'kafkastore.topc' (did you mean kafkastore.topic?)" in done.stderr
