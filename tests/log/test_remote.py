"""Tiered storage on a real S3 server (moto's): segments copied with their indexes, producer snapshot and
leader-epoch checkpoint; local retention deleting only copied segments; retention over the whole log
deleting remote segments; what a crash leaves cleaned; reads below the local log start with the same bytes."""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tidelake.errors import KafkaStorageError, OffsetOutOfRange
from tidelake.log import LogConfig, LogManager, PartitionLog
from tidelake.log.remote import RemoteLogManager, RemoteLogSettings, RemotePartitionMetadata, RemoteSegment
from tidelake.log.remote.metadata import DATA_FILES
from tidelake.protocol.records import Record, build_batch, decode_records, iter_batches
from tidelake.storage import open_storage

NOW = 1_700_000_000_000
WAIT_S = 30
MAINTENANCE_INTERVAL_MS = 3_600_000   # the manager's own passes never come during a test: the test runs them
TOPIC_ID = uuid.UUID("3f1c2a9e-0000-4000-8000-000000000029")


def topic_ids(topic: str) -> uuid.UUID:
    """The one topic of these tests, "t", and its id (a broker answers from its topic metadata)."""
    return TOPIC_ID


def remote_settings(url: str) -> RemoteLogSettings:
    """Passes only when a test runs them (an hour apart), caches of 64 MiB."""
    return RemoteLogSettings(url, {}, task_interval_ms=MAINTENANCE_INTERVAL_MS, index_cache_bytes=64 << 20,
                             reader_cache_bytes=64 << 20, list_offsets_timeout_ms=30_000)


def batch(i: int) -> bytes:
    return build_batch([Record(0, NOW + i, b"k%d" % i, b"v%05d" % i + b"x" * 200)])


def tiered_config(**kw) -> LogConfig:
    return LogConfig(segment_bytes=kw.pop("segment_bytes", 2000), remote_storage_enable=True,
                     local_retention_bytes=kw.pop("local_retention_bytes", 0), retention_ms=kw.pop("retention_ms", -1),
                     **kw)


def append_batches(plog: PartitionLog, count: int, batch_of: Callable[[int], bytes] = batch) -> None:
    for i in range(count):
        plog.append(batch_of(i), now_ms=NOW)


@pytest.fixture
def storage(s3_server):
    return open_storage(s3_server.url("tiered"), s3_server.options)


@pytest.fixture
def remote(storage):
    rlm = RemoteLogManager(storage, remote_settings(storage.url))
    yield rlm
    rlm.stop()


@pytest.fixture
def copied_log(tmp_path: Path):
    """Opens the partition log t-0 with ``count`` batches, starts ``rlm`` over it and runs one pass (its closed
    segments copied; at local.retention.bytes=0 deleted locally). The logs it opened are closed after the test."""
    opened: list[PartitionLog] = []

    def open_and_copy(rlm: RemoteLogManager, count: int, batch_of: Callable[[int], bytes] = batch) -> PartitionLog:
        plog = PartitionLog.open(tmp_path / "t-0", tiered_config())
        opened.append(plog)
        append_batches(plog, count, batch_of)
        rlm.start(lambda: {("t", 0): plog}, topic_ids)
        rlm.run_pass(NOW)
        return plog
    yield open_and_copy
    for plog in opened:
        plog.close()


def tiered_manager(path: Path, storage, config: LogConfig) -> LogManager:
    """A log manager over ``path`` tiering to ``storage``."""
    return LogManager(path, default_config=config, remote=RemoteLogManager(storage, remote_settings(storage.url)))


def manager_with_copied_log(path: Path, storage, count: int, ids: Callable[[str], uuid.UUID] = topic_ids,
                            batch_of: Callable[[int], bytes] = batch) -> LogManager:
    """A tiering log manager holding the partition log t-0 with ``count`` batches, its maintenance started and
    one remote pass run. The test closes it."""
    manager = tiered_manager(path, storage, tiered_config())
    try:
        append_batches(manager.create("t", 0, tiered_config()), count, batch_of)
        manager.start_maintenance(MAINTENANCE_INTERVAL_MS, topic_ids=ids)
        manager.remote.run_pass(NOW)
    except BaseException:
        manager.close()
        raise
    return manager


def read_remote(rlm: RemoteLogManager, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20):
    """A read as the partition service makes it: None while the bytes are fetched, then the answer."""
    ready = threading.Event()
    for _ in range(20):
        ready.clear()
        got = rlm.reader.read(topic, partition, offset, max_bytes, 1 << 62, min_one=True, read_committed=True,
                              on_ready=ready.set)
        if got is not None:
            return got
        assert ready.wait(WAIT_S), "the reader never finished fetching"
    raise AssertionError("still pending after 20 rounds of fetching")


def local_bytes(plog: PartitionLog, offset: int) -> bytes:
    return bytes(plog.read(offset, 1 << 20).data)


def test_copied_segments_are_deleted_locally_and_read_back_with_the_same_bytes(tmp_path: Path, remote):
    plog = PartitionLog.open(tmp_path / "t-0", tiered_config())
    append_batches(plog, 60)
    before = {seg.base_offset: local_bytes(plog, seg.base_offset) for seg in plog.segments[:-1]}
    assert len(before) >= 5
    remote.start(lambda: {("t", 0): plog}, topic_ids)
    remote.run_pass(NOW)
    meta = remote.metadata("t", 0)
    assert [s.base_offset for s in meta.segments] == sorted(before)
    files = remote.storage.list(meta.prefix)
    for seg in meta.segments:
        assert {f"{seg.folder}/{name}" for name in DATA_FILES} <= set(files)
        assert remote.storage.read(seg.path("leader-epoch-checkpoint")).startswith(b"0\n")
    # local.retention.bytes=0: every copied segment gone locally, the log start unmoved
    assert len(plog.segments) == 1 and plog.log_start_offset == 0
    assert plog.local_log_start_offset == plog.segments[0].base_offset
    with pytest.raises(OffsetOutOfRange):
        plog.read(0, 1000)
    for base, data in before.items():
        got = read_remote(remote, "t", 0, base)
        assert (got.first_offset, bytes(got.data)[:len(data)]) == (base, data)
    mid = read_remote(remote, "t", 0, 7, max_bytes=1)   # min_one: the one batch holding offset 7
    assert mid.first_offset == 7 and mid.next_offset == 8
    plog.close()


def test_retention_bytes_applies_to_the_whole_log_and_deletes_remote_segments(remote, copied_log):
    plog = copied_log(remote, 60)
    meta = remote.metadata("t", 0)
    copied = len(meta.segments)
    whole = meta.size_bytes + plog.size_bytes
    plog.update_config(tiered_config(retention_bytes=whole - 3000))
    remote.run_pass(NOW)
    assert 0 < len(meta.segments) < copied
    # as Kafka's retention.bytes: the oldest segments go while what stays is still at least that much
    kept = meta.size_bytes + plog.size_bytes
    assert kept >= whole - 3000 > kept - meta.segments[0].size
    assert plog.log_start_offset == meta.segments[0].base_offset > 0
    gone = [p for p in remote.storage.list(meta.prefix) if not any(p.startswith(s.folder) for s in meta.segments)]
    assert gone == []   # every file of the deleted segments, markers last
    with pytest.raises(OffsetOutOfRange):
        read_remote(remote, "t", 0, 0)


def test_an_interrupted_copy_is_cleaned_and_copied_again(tmp_path: Path, remote):
    plog = PartitionLog.open(tmp_path / "t-0", tiered_config(local_retention_bytes=-1))
    append_batches(plog, 30)
    seg = plog.segments[0]
    meta = RemotePartitionMetadata(remote.storage, "t", 0, TOPIC_ID)
    orphan = RemoteSegment.new(meta.prefix, seg.base_offset, seg.next_offset - 1, seg.size, -1, [], NOW, 0)
    meta.copy_started(orphan)                       # a copy killed after its first write
    remote.storage.write(orphan.path("segment.log"), b"partial")
    remote.start(lambda: {("t", 0): plog}, topic_ids)
    assert remote.metadata("t", 0).unfinished == [orphan.folder]
    remote.run_pass(NOW)
    meta = remote.metadata("t", 0)
    assert not any(p.startswith(orphan.folder) for p in remote.storage.list(meta.prefix))
    assert meta.segments[0].base_offset == seg.base_offset and meta.unfinished == []
    plog.close()


def test_a_restarted_log_starts_where_the_remote_log_does(tmp_path: Path, storage):
    manager = manager_with_copied_log(tmp_path, storage, 60)
    local_start = manager.get("t", 0).local_log_start_offset
    assert local_start > 0
    manager.close()
    # with no log-start-offset checkpoint below it the loader knows only the local segments: the store says more
    assert not (tmp_path / "t-0" / "log-start-offset").exists()
    again = tiered_manager(tmp_path, storage, tiered_config())
    again.load()
    plog = again.get("t", 0)
    assert plog.log_start_offset == local_start
    again.start_maintenance(MAINTENANCE_INTERVAL_MS, topic_ids=topic_ids)
    try:
        assert plog.log_start_offset == 0 and plog.local_log_start_offset == local_start
        assert read_remote(again.remote, "t", 0, 0).first_offset == 0
    finally:
        again.close()


def test_a_read_fetches_ahead_into_the_next_segment(remote, copied_log):
    copied_log(remote, 60)
    first, second = remote.metadata("t", 0).segments[:2]
    got = read_remote(remote, "t", 0, first.base_offset)
    assert got.next_offset == second.base_offset   # the whole first segment in one read
    gets = remote.reader.gets
    # read ahead while the first was answered: the next segment's indexes and bytes need no further GET
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and remote.reader.gets < gets + 3:
        time.sleep(0.01)
    ready = threading.Event()
    answer = remote.reader.read("t", 0, second.base_offset, 1 << 20, 1 << 62, min_one=True, read_committed=False,
                                on_ready=ready.set)
    assert answer is not None and answer.first_offset == second.base_offset


def test_a_failed_get_is_one_storage_error_naming_the_file_then_retried(remote, copied_log):
    copied_log(remote, 30)
    seg = remote.metadata("t", 0).segments[0]
    remote.storage.delete(seg.path("segment.index"))    # the store lost a file behind the broker's back
    inside = seg.base_offset + 1   # (a read at the segment's start needs no index)
    assert inside <= seg.end_offset
    with pytest.raises(KafkaStorageError, match=r"reading t-0-\S+/\S+ of tiered storage failed: .*segment\.index"):
        read_remote(remote, "t", 0, inside)
    ready = threading.Event()   # answered once: the next read tries the store again
    assert remote.reader.read("t", 0, inside, 1000, 1 << 62, min_one=True, read_committed=False,
                              on_ready=ready.set) is None
    assert ready.wait(WAIT_S)


def test_retention_ms_deletes_remote_segments_older_than_it(remote, copied_log):
    plog = copied_log(remote, 60)
    meta = remote.metadata("t", 0)
    keep_from = meta.segments[3]
    # record i has timestamp NOW + i: a retention that the first three segments' newest records are past
    plog.update_config(tiered_config(retention_ms=10))
    remote.run_pass(keep_from.max_timestamp - 1 + 10)
    assert meta.segments[0] == keep_from and plog.log_start_offset == keep_from.base_offset
    assert read_remote(remote, "t", 0, keep_from.base_offset).first_offset == keep_from.base_offset


def test_delete_records_and_topic_deletion_reach_the_remote_segments(tmp_path: Path, storage):
    manager = manager_with_copied_log(tmp_path, storage, 60)
    plog = manager.get("t", 0)
    try:
        meta = manager.remote.metadata("t", 0)
        third = meta.segments[2]
        plog.delete_records_before(third.base_offset + 1)   # DeleteRecords into the remote part
        manager.remote.run_pass(NOW)
        assert meta.segments[0] == third and plog.log_start_offset == third.base_offset + 1
        manager.delete_topic("t")
        manager.remote.run_pass(NOW)
        assert storage.list(meta.prefix) == []
    finally:
        manager.close()


def test_read_committed_from_the_store_names_the_aborted_transactions(tmp_path: Path, remote):
    plog = PartitionLog.open(tmp_path / "t-0", tiered_config())
    seq = {100: 0, 200: 0}
    for i in range(40):
        pid = 100 if i % 2 else 200
        plog.append(build_batch([Record(0, NOW + i, b"k", b"t%05d" % i + b"x" * 200)], producer_id=pid,
                                producer_epoch=0, base_sequence=seq[pid], transactional=True), now_ms=NOW)
        seq[pid] += 1
    aborted_first = plog.producer_state.producers[200].current_txn_first_offset
    plog.append_marker(producer_id=100, producer_epoch=0, commit=True, coordinator_epoch=1, now_ms=NOW)
    plog.append_marker(producer_id=200, producer_epoch=0, commit=False, coordinator_epoch=1, now_ms=NOW)
    for i in range(20):   # later segments close the ones holding the markers
        plog.append(batch(100 + i), now_ms=NOW)
    local = plog.aborted_transactions(0, plog.log_end_offset)
    remote.start(lambda: {("t", 0): plog}, topic_ids)
    remote.run_pass(NOW)
    meta = remote.metadata("t", 0)
    marker_segment = meta.segment_for(40)
    assert marker_segment is not None and plog.local_log_start_offset > 41
    got = read_remote(remote, "t", 0, marker_segment.base_offset)
    assert local == [(200, aborted_first)] and got.aborted == [(200, aborted_first)]
    plog.close()


def test_a_timestamp_below_the_local_log_start_is_found_in_the_remote_time_indexes(remote, copied_log):
    plog = copied_log(remote, 60,   # record i at NOW + 10 * i
                      batch_of=lambda i: build_batch([Record(0, NOW + 10 * i, b"k", b"v%05d" % i + b"x" * 200)]))
    local_start = plog.local_log_start_offset
    assert local_start > 20 and len(remote.metadata("t", 0).segments) >= 5

    def lookup(ts: int, start: int = 0):
        future = remote.reader.offset_for_timestamp("t", 0, ts, start, local_start)
        return None if future is None else future.result(WAIT_S)
    assert lookup(NOW) == (NOW, 0, 0)
    assert lookup(NOW + 71) == (NOW + 80, 8, 0)             # the first record at or after it, mid-segment
    assert lookup(NOW + 71, start=12) == (NOW + 120, 12, 0)  # not before the log start
    # nothing remote reaches it: the local segments answer it
    assert lookup(NOW + 10 * local_start) is None
    assert plog.offset_for_timestamp(NOW + 10 * local_start) == (local_start, NOW + 10 * local_start)
    # a file the store lost: one storage error naming it
    seg = remote.metadata("t", 0).segments[-1]
    remote.storage.delete(seg.path("segment.timeindex"))
    with pytest.raises(KafkaStorageError, match=r"reading t-0-\S+ of tiered storage failed: .*segment\.timeindex"):
        lookup(seg.max_timestamp)


def test_copy_disable_stops_copying_but_remote_reads_and_retention_go_on(remote, copied_log):
    plog = copied_log(remote, 40)
    meta = remote.metadata("t", 0)
    copied_end, copied = meta.end_offset, len(meta.segments)
    assert copied >= 3 and plog.local_log_start_offset == copied_end
    # KIP-950: remote.log.copy.disable keeps what the store holds readable, copies nothing more; the local
    # segments then follow retention.* (not local.retention.*), as Kafka's
    plog.update_config(tiered_config(remote_log_copy_disable=True))
    for i in range(40, 80):
        plog.append(batch(i), now_ms=NOW)
    remote.run_pass(NOW)
    assert (meta.end_offset, len(meta.segments)) == (copied_end, copied)
    assert plog.local_log_start_offset == copied_end and len(plog.segments) > 2   # not deleted uncopied
    assert read_remote(remote, "t", 0, 0).first_offset == 0
    # retention.ms past every record but the newest segment's: remote and local segments both go
    newest = plog.segments[-1]
    plog.update_config(tiered_config(remote_log_copy_disable=True, retention_ms=10))
    remote.run_pass(NOW + 75 + 10 + 1)   # records up to offset 75 expired
    assert meta.segments == ()
    assert plog.log_start_offset == plog.local_log_start_offset <= 76 and plog.segments[-1] is newest
    assert remote.storage.list(meta.prefix) == []


def test_a_topic_created_again_under_the_same_name_never_reads_the_old_ones_segments(tmp_path: Path, storage):
    def valued(prefix: bytes) -> Callable[[int], bytes]:
        return lambda i: build_batch([Record(0, NOW + i, b"k", prefix + b"%05d" % i + b"x" * 200)])
    ids = {"t": uuid.uuid4()}
    manager = manager_with_copied_log(tmp_path, storage, 60, ids=ids.get, batch_of=valued(b"old-"))
    old = manager.remote.metadata("t", 0)
    assert len(old.segments) >= 5
    manager.delete_topic("t")
    manager.close()   # a crash before the next pass: the old topic's remote files are still there
    ids["t"] = uuid.uuid4()   # created again: a new topic id
    again = manager_with_copied_log(tmp_path, storage, 60, ids=ids.get, batch_of=valued(b"new-"))
    plog = again.get("t", 0)
    try:
        meta = again.remote.metadata("t", 0)
        assert len(meta.segments) >= 5 and plog.local_log_start_offset > 0
        for offset in range(plog.local_log_start_offset):   # every offset below the local start: the new topic's
            got = read_remote(again.remote, "t", 0, offset, max_bytes=1)
            pos, h = next(iter_batches(got.data))
            assert decode_records(got.data, pos, h)[0].value.startswith(b"new-%05d" % offset)
        assert meta.prefix != old.prefix
        assert {p.rpartition("/")[0] for p in storage.list(old.prefix)} >= {s.folder for s in old.segments}
    finally:
        again.close()


def test_the_index_cache_holds_at_most_its_configured_bytes(storage, copied_log):
    one_segment = 64 + 8 * 2   # a segment of these tests has one or two offset index entries and no aborted txn
    small = RemoteLogManager(storage, replace(remote_settings(storage.url), index_cache_bytes=2 * one_segment))
    try:
        copied_log(small, 60)
        first, *rest = small.metadata("t", 0).segments
        assert len(rest) >= 4
        for seg in (first, *rest):   # inside each segment: its offset index is looked up
            assert seg.end_offset > seg.base_offset
            read_remote(small, "t", 0, seg.base_offset + 1)
            assert 0 < small.reader.index_cache_bytes <= 2 * one_segment
        ready = threading.Event()   # the first segment's indexes went out: fetched again
        assert small.reader.read("t", 0, first.base_offset + 1, 1000, 1 << 62, min_one=True, read_committed=False,
                                 on_ready=ready.set) is None
        assert ready.wait(WAIT_S)
    finally:
        small.stop()


def test_a_former_leader_copies_and_deletes_nothing_once_a_newer_epoch_took_over(tmp_path: Path, storage):
    """Two replicas of one partition on one store: the old leader (epoch 1) has not learnt yet that another
    broker leads in epoch 2; its next pass must change nothing in the store."""
    old_leader, new_leader = (RemoteLogManager(storage, remote_settings(storage.url)) for _ in range(2))
    old_log = PartitionLog.open(tmp_path / "old" / "t-0", tiered_config())
    new_log = PartitionLog.open(tmp_path / "new" / "t-0", tiered_config())
    try:
        for plog in (old_log, new_log):   # the same records on both replicas, written in epoch 1
            plog.begin_leader_epoch(1)
            append_batches(plog, 40)
        old_leader.start(lambda: {("t", 0): old_log}, topic_ids)
        old_leader.run_pass(NOW)
        copied = len(old_leader.metadata("t", 0).segments)
        assert copied >= 3
        new_log.begin_leader_epoch(2)   # the controller moved leadership: the new leader's first pass
        new_leader.start(lambda: {("t", 0): new_log}, topic_ids)
        new_leader.run_pass(NOW)
        before = sorted(storage.list(""))
        # the old leader still believes it leads: it has more to copy and a retention that deletes
        for i in range(40, 60):
            old_log.append(batch(i), now_ms=NOW)
        old_log.update_config(tiered_config(retention_bytes=2000))
        old_leader.run_pass(NOW)
        assert sorted(storage.list("")) == before
        assert len(new_leader.metadata("t", 0).segments) == copied
    finally:
        for rlm in (old_leader, new_leader):
            rlm.stop()
        old_log.close()
        new_log.close()


def test_turning_tiered_storage_off_with_delete_on_disable_deletes_the_remote_part(tmp_path: Path, storage):
    manager = manager_with_copied_log(tmp_path, storage, 60)
    plog = manager.get("t", 0)
    try:
        prefix = manager.remote.metadata("t", 0).prefix
        local_start = plog.local_log_start_offset
        assert plog.log_start_offset == 0 < local_start and storage.list(prefix)
        # KIP-950: remote.storage.enable=false with remote.log.delete.on.disable=true
        plog.update_config(LogConfig(segment_bytes=2000, retention_ms=-1, remote_log_delete_on_disable=True))
        manager.remote.run_pass(NOW)
        assert plog.log_start_offset == plog.local_log_start_offset == local_start
        assert storage.list(prefix) == [] and manager.remote.metadata("t", 0) is None
        assert bytes(plog.read(local_start, 1 << 20).data)
    finally:
        manager.close()


def test_a_restart_between_turning_tiered_storage_off_and_the_deletion_still_deletes(tmp_path: Path, storage):
    manager = manager_with_copied_log(tmp_path, storage, 60)
    prefix = manager.remote.metadata("t", 0).prefix
    manager.close()   # turned off while down: the next start's config says so
    turned_off = LogConfig(segment_bytes=2000, retention_ms=-1, remote_log_delete_on_disable=True)
    again = tiered_manager(tmp_path, storage, turned_off)
    again.load()
    again.start_maintenance(MAINTENANCE_INTERVAL_MS, topic_ids=topic_ids)
    try:
        assert storage.list(prefix)
        again.remote.run_pass(NOW)
        assert storage.list(prefix) == []
        plog = again.get("t", 0)
        assert plog.log_start_offset == plog.local_log_start_offset > 0
    finally:
        again.close()


def test_a_sequential_read_of_segments_without_transactions_costs_one_get_per_segment(remote, copied_log):
    """Entered at its start, a segment with an empty transaction index needs neither index: its .log (one
    ranged GET for these small segments) is the whole cost, and the read-ahead fetches no index either."""
    copied_log(remote, 60)
    segments = remote.metadata("t", 0).segments
    assert len(segments) >= 4 and all(s.txn_index_bytes == 0 for s in segments)
    before = remote.reader.gets
    for seg in segments:
        got = read_remote(remote, "t", 0, seg.base_offset, max_bytes=seg.size)
        assert got.first_offset == seg.base_offset and got.next_offset == seg.end_offset + 1
    assert remote.reader.gets - before == len(segments), (remote.reader.gets - before, len(segments))
    assert remote.reader.index_cache_bytes == 0



def test_a_follower_lists_only_the_copies_after_its_newest_and_forgets_those_below_the_log_start(tmp_path: Path,
                                                                                               storage, remote):
    """A follower's pass reads only what sorts after the newest segment it knows (its listing does not grow with
    the partition's segments), and drops the segments the leader's log start left behind."""
    plog = PartitionLog.open(tmp_path / "t-0", tiered_config())
    try:
        append_batches(plog, 40)
        remote.start(lambda: {("t", 0): plog}, topic_ids)
        remote.run_pass(NOW)
        follower = RemotePartitionMetadata(storage, "t", 0, TOPIC_ID)
        follower.load_new(0)   # knowing nothing yet: the whole listing
        assert follower.segments == remote.metadata("t", 0).segments
        for i in range(40, 80):
            plog.append(batch(i), now_ms=NOW)
        remote.run_pass(NOW)
        newest = follower.segments[-1].folder
        listed: list[str | None] = []
        real_list = storage.list
        storage.list = lambda prefix="", *, after=None: listed.append(after) or real_list(prefix, after=after)
        try:
            follower.load_new(0)
        finally:
            del storage.list
        assert listed == [f"{newest}/~"]
        assert follower.segments == remote.metadata("t", 0).segments   # the new copies, from one listing after
        start = follower.segments[3].base_offset
        follower.load_new(start)
        assert follower.segments == tuple(s for s in remote.metadata("t", 0).segments if s.end_offset >= start)
    finally:
        plog.close()
