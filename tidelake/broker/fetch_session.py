"""Incremental fetch sessions (KIP-227).

A client opens a session with a full fetch (session id 0, epoch 0); the broker remembers the
partitions and their fetch offsets. Later fetches (same id, next epoch) only name partitions whose
fetch offset changed (plus ``forgotten_topics_data`` to drop some), and the response only carries
partitions that have records, an error, or a changed high watermark / LSO / log start offset.
``FetchSessionCache.begin`` applies those rules to one Fetch and returns a ``SessionFetch`` that
says which partitions to read and which of the results to send.

A requested partition is a tuple ``(topic, topic_id, partition, fetch_offset, partition_max_bytes)``
(topic None: a topic id this broker does not know).
"""
from __future__ import annotations

import collections
import itertools
import random
import time
import uuid

from tidelake.errors import FetchSessionIdNotFound, InvalidFetchSessionEpoch


class FetchSession:
    __slots__ = ("session_id", "epoch", "partitions", "last_used", "_seen")

    def __init__(self, session_id: int, requested: list[tuple]):
        self.session_id = session_id
        self.epoch = 1
        # (topic, partition) -> (topic, topic_id, partition, fetch_offset, partition_max_bytes)
        self.partitions: dict[tuple[str | None, int], tuple] = {}
        self._seen: dict[tuple[str | None, int], tuple[int, int, int]] = {}  # last hw, lso, log start sent
        self.last_used = time.monotonic()
        self.update(requested, [])

    def update(self, requested: list[tuple], forgotten: list[tuple[str | None, int]]) -> None:
        for entry in requested:
            self.partitions[(entry[0], entry[2])] = entry
        for key in forgotten:
            self.partitions.pop(key, None)
            self._seen.pop(key, None)
        self.last_used = time.monotonic()

    def partitions_list(self) -> list[tuple]:
        return list(self.partitions.values())

    def observe(self, topic: str | None, partition: int, hw: int, lso: int, log_start: int) -> bool:
        """Record what the client will have been told; True if it differs from last time."""
        key = (topic, partition)
        state = (hw, lso, log_start)
        changed = self._seen.get(key) != state
        self._seen[key] = state
        return changed


class FetchSessionCache:
    """Sessions by id, least-recently-used evicted beyond ``max_sessions``."""

    def __init__(self, max_sessions: int = 1000):
        self.max_sessions = max_sessions
        self._sessions: collections.OrderedDict[int, FetchSession] = collections.OrderedDict()
        self._rng = random.Random(uuid.uuid4().int)

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, requested: list[tuple]) -> FetchSession | None:
        if self.max_sessions <= 0:
            return None
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        for _ in itertools.count():
            sid = self._rng.randint(1, 2**31 - 1)
            if sid not in self._sessions:
                break
        session = FetchSession(sid, requested)
        self._sessions[sid] = session
        return session

    def get(self, session_id: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
            session.last_used = time.monotonic()
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def begin(self, session_id: int, epoch: int, requested: list[tuple],
              forgotten: list[tuple[str | None, int]]) -> SessionFetch:
        """KIP-227 for one Fetch (v7+). Epoch 0 opens a session (a full fetch; an old one with that
        id is dropped), epoch -1 is a full fetch without a session, a later epoch continues session
        ``session_id``: its partitions, updated by ``requested`` and ``forgotten``. Raises
        FetchSessionIdNotFound / InvalidFetchSessionEpoch (the whole Fetch fails with that code)."""
        if epoch in (0, -1):
            if session_id != 0:
                self.remove(session_id)
            session = self.create(requested) if epoch == 0 else None
            if session is None:
                return SessionFetch(None, requested, incremental=False)
        else:
            session = self.get(session_id)
            if session is None:
                raise FetchSessionIdNotFound(f"fetch session {session_id} not found")
            if session.epoch != epoch:
                raise InvalidFetchSessionEpoch(f"fetch session {session_id}: epoch {epoch} != {session.epoch}")
            session.update(requested, forgotten)
        session.epoch = epoch + 1 if epoch > 0 else 1
        return SessionFetch(session, session.partitions_list(), incremental=epoch > 0)


class SessionFetch:
    """One Fetch as its session sees it: the partitions to read and which results to send."""
    __slots__ = ("session", "partitions", "incremental")

    def __init__(self, session: FetchSession | None, partitions: list[tuple], *, incremental: bool):
        self.session = session
        self.partitions = partitions
        self.incremental = incremental

    @property
    def session_id(self) -> int:
        return self.session.session_id if self.session is not None else 0

    def include(self, topic: str | None, partition: int, error: int, hw: int, lso: int, log_start: int,
                has_records: bool) -> bool:
        """Whether a partition's result goes in the response: always for a full fetch; for an
        incremental one only with records, an error, or a changed HW / LSO / log start."""
        session = self.session
        if session is None:
            return True
        changed = session.observe(topic, partition, hw, lso, log_start)
        return not self.incremental or has_records or error != 0 or changed
