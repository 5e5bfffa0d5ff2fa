"""The storage interface on a local disk, in memory and on a real S3 server (moto's standalone server,
started by the test on 127.0.0.1): reads, writes, listing, and put-if-absent, which racing writers —
threads and separate processes — win exactly once per path."""
from __future__ import annotations

import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import free_port
from tidelake.storage import StorageError, open_storage
from tidelake.storage.objects import S3_OPTIONS


@pytest.fixture(params=["local", "memory", "s3"])
def storage(request, tmp_path):
    if request.param == "local":
        return open_storage(str(tmp_path / "t"))
    if request.param == "memory":
        return open_storage(f"memory://{tmp_path.name}")
    server = request.getfixturevalue("s3_server")
    return open_storage(server.url("storage"), server.options)


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


def test_read_range_is_the_bytes_asked_for(storage):
    storage.write("segments/a.log", bytes(range(256)) * 4)
    assert storage.read_range("segments/a.log", 250, 10) == bytes(range(250, 256)) + bytes(range(4))
    assert storage.read_range("segments/a.log", 1020, 4) == bytes(range(252, 256))
    with pytest.raises(FileNotFoundError):
        storage.read_range("segments/b.log", 0, 1)


def test_write_file_streams_a_local_file(storage, tmp_path):
    source = tmp_path / "segment.log"
    source.write_bytes(bytes(range(256)) * 40000)   # 10 MB: an object store uploads it in parts
    storage.write_file("segments/a.log", str(source))
    assert storage.size("segments/a.log") == source.stat().st_size
    assert storage.read("segments/a.log") == source.read_bytes()


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


def test_racing_processes_on_s3_win_each_version_once(s3_server):
    url = s3_server.url("procs")
    args = [f"{k}={v}" for k, v in s3_server.options.items()]
    procs = [subprocess.Popen([sys.executable, "-c", RACER, url, str(w), *args], stdout=subprocess.PIPE, text=True)
             for w in range(3)]
    won = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        won += [int(v) for v in out.strip().split(",") if v]
    assert sorted(won) == list(range(30))
    storage = open_storage(url, s3_server.options)
    assert len(storage.list("_tidelake_log")) == 30
    assert {storage.read(p) for p in storage.list("_tidelake_log")} <= {b"0", b"1", b"2"}


def test_unsupported_url():
    with pytest.raises(ValueError, match="unsupported storage URL"):
        open_storage("ftp://host/table")


def test_create_of_the_same_bytes_again_counts_as_won(storage):
    """A retried PUT whose first attempt succeeded finds its own bytes: still the winner."""
    assert storage.create("_tidelake_log/00000000000000000002.json", b"mine")
    assert storage.create("_tidelake_log/00000000000000000002.json", b"mine")
    assert not storage.create("_tidelake_log/00000000000000000002.json", b"theirs")


def test_list_after_and_list_info(storage):
    for v in range(5):
        storage.write(f"_tidelake_log/{v:020d}.json", b"x" * v)
    storage.write("_tidelake_log/00000000000000000003.checkpoint.json", b"{}")
    after = storage.list("_tidelake_log", after="_tidelake_log/00000000000000000002.json")
    assert after == ["_tidelake_log/00000000000000000003.checkpoint.json", "_tidelake_log/00000000000000000003.json",
                     "_tidelake_log/00000000000000000004.json"]
    info = {f.path: f for f in storage.list_info("_tidelake_log")}
    assert info["_tidelake_log/00000000000000000004.json"].size == 4
    assert all(f.modified_ms > 1_600_000_000_000 for f in info.values())
    assert storage.list("no-such-folder") == []


def test_pickles_as_url_and_options(storage):
    """A Spark task gets the storage by pickle: it opens the same store again."""
    storage.write("a/b.bin", b"42")
    copy = pickle.loads(pickle.dumps(storage))
    assert type(copy) is type(storage) and copy.url == storage.url
    assert copy.read("a/b.bin") == b"42"


def test_local_path_only_on_a_local_disk(storage, tmp_path):
    if storage.url.startswith(("s3://", "memory://")):
        assert storage.local_path("a/b.bin") is None
        assert storage.location("a/b.bin") == f"{storage.url}/a/b.bin"
    else:
        assert storage.local_path("a/b.bin") == str(tmp_path / "t" / "a" / "b.bin")


def test_local_storage_is_created_lazily(tmp_path):
    """Opening (e.g. to ask whether a table exists) creates nothing; the first write creates the folders."""
    s = open_storage(str(tmp_path / "nothing" / "here"))
    assert s.list() == [] and not s.exists("x")
    assert not (tmp_path / "nothing").exists()
    s.write("a/b", b"1")
    assert (tmp_path / "nothing" / "here" / "a" / "b").read_bytes() == b"1"


def test_unknown_s3_option_is_refused():
    with pytest.raises(ValueError, match="unknown storage option.*endpont"):
        open_storage("s3://lake/t", {"endpont": "http://127.0.0.1:1"})
    with pytest.raises(ValueError, match="for s3://"):
        open_storage("/tmp/t", {"region": "us-east-1"})


def test_unreachable_s3_is_one_line_naming_the_file():
    s = open_storage("s3://lake/t", {"endpoint": f"http://127.0.0.1:{free_port()}", "region": "us-east-1",
                                     "access_key_id": "a", "secret_access_key": "b"})
    with pytest.raises(StorageError) as e:
        s.read("_tidelake_log/00000000000000000000.json")
    assert "\n" not in str(e.value) and str(e.value).startswith("s3://lake/t/_tidelake_log/00000000000000000000.json: ")


def test_missing_bucket_is_a_storage_error_not_a_missing_file(s3_server):
    """(not FileNotFoundError: a table would take that for "no such table" or "expired file")"""
    s = open_storage("s3://no-such-bucket/t", s3_server.options)
    for call in (lambda: s.read("x"), lambda: s.write("x", b"1"), lambda: s.create("x", b"1"), lambda: s.list()):
        with pytest.raises(StorageError) as e:
            call()
        assert str(e.value).startswith("s3://no-such-bucket/t") and "NoSuchBucket" in str(e.value), str(e.value)


def _fsynced_inodes(monkeypatch) -> set[int]:
    """The inodes os.fsync is called on from now (the real fsync still runs)."""
    import os
    seen: set[int] = set()
    real = os.fsync

    def spy(fd):
        seen.add(os.fstat(fd).st_ino)
        return real(fd)
    monkeypatch.setattr(os, "fsync", spy)
    return seen


def test_a_tables_data_files_and_log_entries_are_fsynced_before_the_commit(tmp_path, monkeypatch):
    """A commit's log entry is fsynced, so the data files it names must be too: a version that survives a
    power loss finds its files whole. Also each new bucket folder's entry in data/."""
    import pyarrow as pa
    from tidelake.table import Table
    t = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"],
                     {"write.bucket.num": "2"})
    seen = _fsynced_inodes(monkeypatch)
    t.upsert(pa.table({"id": [1, 2, 3, 4], "v": list("abcd")}))
    data = list((tmp_path / "t" / "data").rglob("*.parquet"))
    assert data and all(f.stat().st_ino in seen for f in data)
    assert all(f.parent.stat().st_ino in seen for f in data)
    assert (tmp_path / "t" / "data").stat().st_ino in seen
    log = sorted((tmp_path / "t" / "_tidelake_log").glob("*.json"))[-1]
    assert log.stat().st_ino in seen


def test_fsync_false_is_a_local_option_that_skips_every_fsync_and_pickles(tmp_path, monkeypatch):
    import pyarrow as pa
    from tidelake.table import Table
    s = open_storage(str(tmp_path / "t"), {"fsync": "false"})
    assert pickle.loads(pickle.dumps(s)).options == {"fsync": "false"}
    seen = _fsynced_inodes(monkeypatch)
    t = Table.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]), ["id"],
                     storage_options={"fsync": "false"})
    t.upsert(pa.table({"id": [1, 2]}))
    assert seen == set() and t.scan().num_rows == 2
    with pytest.raises(ValueError, match="fsync='maybe'.*expected true or false"):
        open_storage(str(tmp_path / "u"), {"fsync": "maybe"})
    with pytest.raises(ValueError, match="a local disk takes only fsync"):
        open_storage(str(tmp_path / "u"), {"region": "x"})


AWS_VARIABLES = sorted({v for names in S3_OPTIONS.values() for v in names})


@pytest.fixture
def no_aws_settings(monkeypatch):
    """Nothing from the environment: only the options a test gives count. Without a key the client asks the
    instance metadata service for one: here a closed local port, so that request fails at once wherever the
    test runs (not after the network's timeout, nor with a real EC2 instance's credentials)."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{free_port()}")


def test_real_aws_without_an_endpoint_opens_and_sends_to_the_regional_endpoint(no_aws_settings):
    """No endpoint = AWS itself: the store is built (an unset endpoint was once passed on as None, a TypeError)
    and the request goes to AWS's regional endpoint; here that fails on the network (or, with a network, on
    the made-up key), as one line naming the file."""
    s = open_storage("s3://lake/t", {"region": "eu-west-1", "access_key_id": "a", "secret_access_key": "b"})
    with pytest.raises(StorageError) as e:
        s.read("_tidelake_log/00000000000000000000.json")
    message = str(e.value)
    assert "\n" not in message and message.startswith("s3://lake/t/_tidelake_log/00000000000000000000.json: ")
    assert ("https://s3.eu-west-1.amazonaws.com/lake/t/_tidelake_log/00000000000000000000.json" in message
            or "InvalidAccessKeyId" in message), message


def test_real_aws_region_from_the_environment(no_aws_settings, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    with pytest.raises(StorageError) as e:
        open_storage("s3://lake/t").list()
    assert "s3.ap-south-1.amazonaws.com" in str(e.value) or "InvalidAccessKeyId" in str(e.value), str(e.value)


ALONE = {"endpoint": "http://127.0.0.1:{port}", "region": "eu-west-1", "access_key_id": "a",
         "secret_access_key": "b", "session_token": "t", "allow_http": "true"}


@pytest.mark.parametrize("name", sorted(S3_OPTIONS))
def test_each_s3_option_alone_builds_the_store(name, no_aws_settings):
    """Every option given with none of the others (and no environment): a store, whose first request fails
    with one line (no endpoint listening, no network to AWS or to a credentials service) — not a TypeError."""
    if name in ("access_key_id", "secret_access_key"):   # half a key: refused when opened, in one line
        with pytest.raises(ValueError, match=f"storage option {name} is set but .* is not"):
            open_storage("s3://lake/t", {name: ALONE[name]})
        return
    s = open_storage("s3://lake/t", {name: ALONE[name].format(port=free_port())})
    with pytest.raises(StorageError) as e:
        s.read("x")
    assert "\n" not in str(e.value) and str(e.value).startswith("s3://lake/t/x: "), str(e.value)


def test_allow_http_is_true_or_false(no_aws_settings):
    with pytest.raises(ValueError, match="allow_http='yes'.*true or false"):
        open_storage("s3://lake/t", {"allow_http": "yes"})


def test_table_open_on_real_aws_with_a_region_option(no_aws_settings):
    from tidelake.table import Table
    with pytest.raises(StorageError) as e:
        Table.open("s3://lake/t", storage_options={"region": "eu-west-1", "access_key_id": "a",
                                                    "secret_access_key": "b"})
    assert "s3.eu-west-1.amazonaws.com" in str(e.value) or "InvalidAccessKeyId" in str(e.value), str(e.value)
