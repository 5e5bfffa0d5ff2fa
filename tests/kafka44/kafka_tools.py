"""Kafka 4.4's command-line tools (the pinned kafka-tools jar), run in batches: every command of a batch in one JVM,
one after the other (tests/java/ToolBatch.java), and the batches of several brokers at once, so that a test
comparing tidelake's answers with Kafka's pays for two JVMs, not two per command."""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kafka_peer import java_command

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
BATCH_TIMEOUT_S = 300   # a last guard: a batch ends when its last command has answered


@dataclass(frozen=True)
class ToolRun:
    code: int
    out: str
    err: str


def _parse(stdout: bytes) -> list[ToolRun]:
    runs, at = [], 0
    while at < len(stdout):
        end = stdout.index(b"\n", at)
        header = stdout[at:end].decode()
        assert header.startswith("==> "), header
        code, out_len, err_len = (int(x) for x in header[4:].split("\t"))
        out = stdout[end + 1:end + 1 + out_len]
        err = stdout[end + 1 + out_len:end + 1 + out_len + err_len]
        runs.append(ToolRun(code, out.decode(), err.decode()))
        at = end + 1 + out_len + err_len
    return runs


def _run_batch(bootstrap: str, commands: list[tuple[str, ...]]) -> list[ToolRun]:
    lines = "".join("\t".join((tool, "--bootstrap-server", bootstrap, *args)) + "\n" for tool, *args in commands)
    done = subprocess.run(java_command("ToolBatch"), input=lines.encode(), capture_output=True,
                          timeout=BATCH_TIMEOUT_S)
    runs = _parse(done.stdout)
    assert done.returncode == 0 and len(runs) == len(commands), (done.returncode, done.stderr.decode()[-3000:])
    return runs


def run_batches(batches: dict[str, list[tuple[str, ...]]]) -> dict[str, list[ToolRun]]:
    """``{bootstrap: [(tool class, *args), ...]}`` -> each command's run, every bootstrap's batch at once;
    ``--bootstrap-server <bootstrap>`` is put after each tool class."""
    with ThreadPoolExecutor(len(batches)) as pool:
        futures = {bootstrap: pool.submit(_run_batch, bootstrap, commands) for bootstrap, commands in batches.items()}
        return {bootstrap: future.result() for bootstrap, future in futures.items()}


def run_on_both(kafka: str, tidelake: str, commands: list[tuple[str, ...]]) -> list[tuple[ToolRun, ToolRun]]:
    """The same commands against Kafka and tidelake: (Kafka's run, tidelake's run) per command."""
    runs = run_batches({kafka: commands, tidelake: commands})
    return list(zip(runs[kafka], runs[tidelake]))
