"""Property test: random appends / reads / rolls / reopens (clean and crashed) / DeleteRecords /
truncation / timestamp lookups against a simple in-memory model of the log."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tidelake.log import LogConfig, PartitionLog
from tidelake.protocol.records import Record, build_batch, decode_records, iter_batches

values = st.binary(min_size=0, max_size=120)
one_batch = st.tuples(st.lists(values, min_size=1, max_size=6), st.integers(0, 10_000))


class LogModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="log-model-"))
        self.dir = self.tmp / "t-0"
        self.batches: list[tuple[int, list[bytes], int]] = []  # (base offset, values, timestamp)
        self.log_start = 0
        self.leo = 0
        # idempotent producer 77 (epoch 0): its batches in log order as (first_seq, last_seq, base, last)
        self.producer_batches: list[tuple[int, int, int, int]] = []
        self.log: PartitionLog | None = None  # opened by the @initialize rule

    @initialize(segment_bytes=st.integers(200, 3000), index_interval=st.integers(1, 600))
    def open_log(self, segment_bytes, index_interval):
        self.cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval)
        self.log = PartitionLog.open(self.dir, self.cfg)

    def teardown(self):
        if self.log is not None and not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -------------------------------------------------------------- model helpers
    def records(self):
        for base, vals, ts in self.batches:
            for i, v in enumerate(vals):
                if base + i >= self.log_start:
                    yield base + i, v, ts

    # -------------------------------------------------------------- rules
    @rule(request=st.lists(one_batch, min_size=1, max_size=3))
    def append(self, request):
        data = b"".join(build_batch([Record(i, ts, None, v) for i, v in enumerate(vals)])
                        for vals, ts in request)
        r = self.log.append(data, now_ms=1)
        assert r.base_offset == self.leo and not r.duplicate
        for vals, ts in request:
            self.batches.append((self.leo, vals, ts))
            self.leo += len(vals)
        assert r.last_offset == self.leo - 1

    @rule(vals=st.lists(values, min_size=1, max_size=4))
    def append_idempotent(self, vals):
        seq = self.producer_batches[-1][1] + 1 if self.producer_batches else 0
        data = build_batch([Record(i, 5000, None, v) for i, v in enumerate(vals)],
                           producer_id=77, producer_epoch=0, base_sequence=seq)
        r = self.log.append(data, now_ms=1)
        assert not r.duplicate and r.base_offset == self.leo
        self.batches.append((self.leo, vals, 5000))
        self.producer_batches.append((seq, seq + len(vals) - 1, self.leo, self.leo + len(vals) - 1))
        self.leo += len(vals)

    @precondition(lambda self: self.producer_batches)
    @rule(data=st.data())
    def retry_idempotent(self, data):
        first_seq, last_seq, base, last = data.draw(st.sampled_from(self.producer_batches[-5:]))
        retry = build_batch([Record(i, 0, None, b"retry") for i in range(last_seq - first_seq + 1)],
                            producer_id=77, producer_epoch=0, base_sequence=first_seq)
        r = self.log.append(retry, now_ms=1)
        assert r.duplicate and (r.base_offset, r.last_offset) == (base, last)

    @rule(data=st.data(), max_bytes=st.integers(0, 3000))
    def read(self, data, max_bytes):
        offset = data.draw(st.integers(self.log_start, self.leo))
        res = self.log.read(offset, max_bytes)
        if offset == self.leo:
            assert res.data == b""
            return
        got = [(r.offset, r.value) for pos, h in iter_batches(res.data)
               for r in decode_records(res.data, pos, h)]
        assert got, "at least one batch"
        assert len(res.data) <= max_bytes or len(list(iter_batches(res.data))) == 1
        model = {o: v for o, v, _ in self.records()}
        first_batch = next(b for b in self.batches if b[0] + len(b[1]) > offset)
        assert got[0][0] == first_batch[0], "reads start with the batch containing the offset"
        for o, v in got:
            if o >= self.log_start:
                assert model[o] == v
        assert [o for o, _ in got] == list(range(got[0][0], got[-1][0] + 1))

    @rule()
    def roll(self):
        self.log.roll(1)

    @rule()
    def reopen_clean(self):
        self.log.close()
        self.log = PartitionLog.open(self.dir, self.cfg)

    @rule()
    def reopen_after_crash(self):
        for seg in self.log.segments:
            if seg.fd >= 0:
                os.close(seg.fd)
                seg.fd = -1
        self.log = PartitionLog.open(self.dir, self.cfg)
        assert self.log.recovery_report == []  # nothing torn: nothing may be lost

    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(self.log_start, self.leo))
        assert self.log.delete_records_before(offset) == offset
        self.log_start = offset

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(self.log_start + 1, self.leo))
        holder = next((b for b in self.batches if b[0] + len(b[1]) > offset), None)
        self.log.truncate_to(offset)
        if holder is not None and holder[0] <= self.log_start:
            # the batch holding the log start goes: the log restarts empty, producer state with it
            offset = self.log_start
            self.producer_batches = []
        self.batches = [b for b in self.batches if b[0] + len(b[1]) - 1 < offset]
        self.producer_batches = [b for b in self.producer_batches if b[3] < offset]
        self.leo = self.batches[-1][0] + len(self.batches[-1][1]) if self.batches else self.log_start
        if self.leo < self.log_start:
            self.leo = self.log_start

    @rule(ts=st.integers(0, 10_001))
    def timestamp_lookup(self, ts):
        want = next(((o, t) for o, _v, t in self.records() if t >= ts), None)
        assert self.log.offset_for_timestamp(ts) == want

    @invariant()
    def offsets_match(self):
        if self.log is not None:
            assert self.log.log_end_offset == self.leo
            assert self.log.log_start_offset == self.log_start
            assert self.log.high_watermark == self.leo


LogModel.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestLogModel = LogModel.TestCase
