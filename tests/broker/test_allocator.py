import os
import subprocess
import sys


def _run(env_extra: dict) -> str:
    code = "from tidelake.broker.allocator import keep_large_buffers as k; print(k())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | env_extra
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def test_thresholds_are_set_on_glibc():
    assert _run({}) == "True"


def test_a_process_with_its_own_malloc_settings_keeps_them():
    assert _run({"MALLOC_ARENA_MAX": "2"}) == "False"
