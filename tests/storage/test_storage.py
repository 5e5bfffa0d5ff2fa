"""The storage interface on a local disk, in memory and on a real S3 server (moto's standalone server,
started by the test on 127.0.0.1): reads, writes, listing, and put-if-absent, which racing writers —
threads and separate processes — win exactly once per path."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tidelake.storage import open_storage


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    """moto's standalone S3 server on a free port, with a bucket; stopped by its pid."""
    port = _free_port()
    moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "moto_server did not start"
                time.sleep(0.1)
        import boto3
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                     aws_secret_access_key="test").create_bucket(Bucket="lake")
        yield {"endpoint": endpoint, "region": "us-east-1", "access_key_id": "test", "secret_access_key": "test"}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(params=["local", "memory", "s3"])
def storage(request, tmp_path):
    if request.param == "local":
        return open_storage(str(tmp_path / "t"))
    if request.param == "memory":
        return open_storage(f"memory://{tmp_path.name}")
    options = request.getfixturevalue("s3_server")
    return open_storage(f"s3://lake/{tmp_path.name}", options)


def test_read_write_list_delete(storage):
    storage.write("_tidelake_log/00000000000000000000.json", b'{"v": 0}')
    storage.write("data/bucket-00000/a.parquet", b"PAR1")
    assert storage.read("_tidelake_log/00000000000000000000.json") == b'{"v": 0}'
    assert storage.list("_tidelake_log") == ["_tidelake_log/00000000000000000000.json"]
    assert storage.list() == ["_tidelake_log/00000000000000000000.json", "data/bucket-00000/a.parquet"]
    assert storage.size("data/bucket-00000/a.parquet") == 4
    storage.write("data/bucket-00000/a.parquet", b"PAR1PAR1")   # replaced whole
    assert storage.read("data/bucket-00000/a.parquet") == b"PAR1PAR1"
    storage.delete("data/bucket-00000/a.parquet")
    storage.delete("data/bucket-00000/a.parquet")   # twice: not an error
    assert not storage.exists("data/bucket-00000/a.parquet")
    with pytest.raises(FileNotFoundError):
        storage.read("data/bucket-00000/a.parquet")


def test_create_is_put_if_absent(storage):
    """On S3 this is If-None-Match: * — the server must refuse the second put (moto's does: 412)."""
    assert storage.create("_tidelake_log/00000000000000000001.json", b"first")
    assert not storage.create("_tidelake_log/00000000000000000001.json", b"second")
    assert storage.read("_tidelake_log/00000000000000000001.json") == b"first"


def test_racing_threads_win_each_version_once(storage):
    def commit(writer: int) -> list[int]:
        won = []
        for v in range(20):
            if storage.create(f"_tidelake_log/{v:020d}.json", f"writer {writer}".encode()):
                won.append(v)
        return won
    with ThreadPoolExecutor(4) as pool:
        wins = list(pool.map(commit, range(4)))
    assert sorted(v for w in wins for v in w) == list(range(20))   # each version won exactly once


RACER = """
import sys
from tidelake.storage import open_storage
url, writer = sys.argv[1], sys.argv[2]
options = dict(kv.split("=", 1) for kv in sys.argv[3:])
s = open_storage(url, options)
print(",".join(str(v) for v in range(30) if s.create(f"_tidelake_log/{v:020d}.json", writer.encode())))
"""


def test_racing_processes_on_s3_win_each_version_once(s3_server, tmp_path):
    url = f"s3://lake/{tmp_path.name}-procs"
    args = [f"{k}={v}" for k, v in s3_server.items()]
    procs = [subprocess.Popen([sys.executable, "-c", RACER, url, str(w), *args], stdout=subprocess.PIPE, text=True)
             for w in range(3)]
    won = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        won += [int(v) for v in out.strip().split(",") if v]
    assert sorted(won) == list(range(30))
    storage = open_storage(url, s3_server)
    assert len(storage.list("_tidelake_log")) == 30
    assert {storage.read(p) for p in storage.list("_tidelake_log")} <= {b"0", b"1", b"2"}


def test_unsupported_url():
    with pytest.raises(ValueError, match="unsupported storage URL"):
        open_storage("ftp://host/table")
