"""One share-partition (KIP-932): the delivery state of a (share group, topic, partition)'s records.

The records from the share-partition start offset (SPSO) to the end offset are *in flight*; each is
AVAILABLE, ACQUIRED (by one member, until its lock deadline), ACKNOWLEDGED or ARCHIVED, with the number
of times it was delivered. Offsets below the SPSO are done; offsets from the end offset on have never been
fetched. A state machine without I/O: the clock is the ``now_ms`` arguments, the records come from the
caller, and every change that must be persisted is reported by ``changed``.

Rules (Kafka's):
- ``acquire`` hands AVAILABLE records to a member: ACQUIRED, delivery count + 1, locked until now +
  the record lock duration; at most ``partition_max_record_locks`` records are in flight.
- ``acknowledge``: only the member holding a record may acknowledge it (else INVALID_RECORD_STATE, and
  nothing of that batch changes). ACCEPT -> ACKNOWLEDGED, REJECT (and GAP) -> ARCHIVED, RELEASE ->
  AVAILABLE, RENEW -> locked again for the lock duration.
- a lock that expires, a released record and a record of a member that left go back to AVAILABLE, unless
  their delivery count reached ``delivery_count_limit``: then ARCHIVED (a poison record stops).
- the SPSO moves past every leading ACKNOWLEDGED / ARCHIVED record.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from tidelake import errors
from tidelake.coordinator.share_config import ShareGroupConfig

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4  # Kafka's RecordState ids (persisted)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4  # acknowledge types on the wire
_DONE = (ACKNOWLEDGED, ARCHIVED)


@dataclass(slots=True)
class InFlightRecord:
    state: int
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True)
class AcquiredRange:
    """Records ``first_offset``..``last_offset`` acquired together, all delivered ``delivery_count`` times."""
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class StateBatch:
    """A run of in-flight records with one persisted state and delivery count (ShareSnapshot's StateBatch)."""
    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


@dataclass
class SharePartition:
    config: ShareGroupConfig
    start_offset: int  # the SPSO
    records: dict[int, InFlightRecord] = field(default_factory=dict)  # every offset in [start, end)
    end_offset: int = -1
    state_epoch: int = 0
    changed: bool = False  # a change to persist since the last ``take_changed``
    # not persisted: whether a ShareFetch has been answered from it since this broker began serving it (Kafka's
    # leader loads a share-partition's state on its first fetch, one partition at a time: see share_fetch)
    served_fetch: bool = False

    def __post_init__(self) -> None:
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset

    # -- fetching ---------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int | None:
        """Where a fetch should read from: the first AVAILABLE in-flight record, else the end offset;
        None when the in-flight window is full of records no one may take now."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == AVAILABLE:
                return offset
        if self.end_offset - self.start_offset >= self.config.partition_max_record_locks:
            return None
        return self.end_offset

    def acquire(self, member_id: str, offsets: Iterable[tuple[int, bool]], max_records: int,
                now_ms: int) -> list[AcquiredRange]:
        """Acquire for ``member_id`` the AVAILABLE records among ``offsets`` — (offset, deliverable) in
        order, as read from the log; a record not deliverable (a control record, an aborted transaction's
        record under read_committed) is archived, never delivered. At most ``max_records`` records."""
        out: list[AcquiredRange] = []
        deadline = now_ms + self.config.record_lock_duration_ms
        taken = 0
        for offset, deliverable in offsets:
            if offset < self.start_offset:
                continue
            if offset >= self.end_offset:
                if offset - self.start_offset >= self.config.partition_max_record_locks or taken >= max_records:
                    break
                for gap in range(self.end_offset, offset):  # compacted-away offsets: nothing to deliver
                    self.records[gap] = InFlightRecord(ARCHIVED)
                self.records[offset] = InFlightRecord(AVAILABLE)
                self.end_offset = offset + 1
                self.changed = True
            rec = self.records[offset]
            if rec.state != AVAILABLE:
                continue
            if not deliverable:
                rec.state = ARCHIVED
                self.changed = True
                continue
            if taken >= max_records:
                break
            rec.state, rec.member_id, rec.lock_deadline_ms = ACQUIRED, member_id, deadline
            rec.delivery_count += 1
            taken += 1
            self.changed = True
            last = out[-1] if out else None
            if last is not None and last.last_offset == offset - 1 and last.delivery_count == rec.delivery_count:
                out[-1] = AcquiredRange(last.first_offset, offset, last.delivery_count)
            else:
                out.append(AcquiredRange(offset, offset, rec.delivery_count))
        self._advance()
        return out

    # -- acknowledging ----------------------------------------------------------------------------
    def acknowledge(self, member_id: str, first_offset: int, last_offset: int, types: list[int],
                    now_ms: int) -> None:
        """Apply one acknowledgement batch: ``types`` holds one type for the whole range or one per
        offset. Raises InvalidRecordState (nothing changed) when a record of the range is not acquired by
        ``member_id``, InvalidRequest for a malformed batch."""
        count = last_offset - first_offset + 1
        if count <= 0 or len(types) not in (1, count) or any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW)
                                                              for t in types):
            raise errors.InvalidRequest(f"acknowledgement batch {first_offset}-{last_offset} with types {types}")
        for offset in range(first_offset, last_offset + 1):
            rec = self.records.get(offset)
            if rec is None or rec.state != ACQUIRED or rec.member_id != member_id:
                raise errors.InvalidRecordState(
                    f"offset {offset} is not acquired by member {member_id}"
                    + ("" if rec is None else f" (state {rec.state})"))
        for i, offset in enumerate(range(first_offset, last_offset + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            rec = self.records[offset]
            if kind == RENEW:
                rec.lock_deadline_ms = now_ms + self.config.record_lock_duration_ms
                continue
            if kind == ACCEPT:
                rec.state = ACKNOWLEDGED
            elif kind in (REJECT, GAP):
                rec.state = ARCHIVED
            else:
                self._release(rec)
            rec.member_id = None
            self.changed = True
        self._advance()

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose lock deadline passed; the number released."""
        return self._release_acquired(lambda rec: rec.lock_deadline_ms <= now_ms)

    def release_member(self, member_id: str) -> int:
        """A member left (or its share session closed): release every record it holds."""
        return self._release_acquired(lambda rec: rec.member_id == member_id)

    def _release_acquired(self, chosen: Callable[[InFlightRecord], bool]) -> int:
        """Release the acquired records ``chosen`` picks; the number released."""
        n = 0
        for rec in self.records.values():
            if rec.state == ACQUIRED and chosen(rec):
                self._release(rec)
                n += 1
        if n:
            self.changed = True
            self._advance()
        return n

    def _release(self, rec: InFlightRecord) -> None:
        rec.state = ARCHIVED if rec.delivery_count >= self.config.delivery_count_limit else AVAILABLE
        rec.member_id, rec.lock_deadline_ms = None, 0

    def _advance(self) -> None:
        while self.start_offset < self.end_offset and self.records[self.start_offset].state in _DONE:
            del self.records[self.start_offset]
            self.start_offset += 1

    # -- admin ------------------------------------------------------------------------------------
    def reset(self, start_offset: int) -> None:
        """AlterShareGroupOffsets: start over at ``start_offset`` with nothing in flight."""
        self.records.clear()
        self.start_offset = self.end_offset = start_offset
        self.state_epoch += 1
        self.changed = True

    def in_flight(self, state: int) -> list[int]:
        return [o for o, r in self.records.items() if r.state == state]

    # -- persistence ------------------------------------------------------------------------------
    def take_changed(self) -> bool:
        changed, self.changed = self.changed, False
        return changed

    def persist_again(self) -> None:
        """The state taken to persist was not written: take it again at the next flush."""
        self.changed = True

    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as runs of (state, delivery count). A lock does not survive a restart, so
        an ACQUIRED record is persisted AVAILABLE (Kafka's rule), keeping its delivery count."""
        out: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            rec = self.records[offset]
            state = AVAILABLE if rec.state == ACQUIRED else rec.state
            last = out[-1] if out else None
            if last is not None and last.state == state and last.delivery_count == rec.delivery_count:
                out[-1] = StateBatch(last.first_offset, offset, state, rec.delivery_count)
            else:
                out.append(StateBatch(offset, offset, state, rec.delivery_count))
        return out

    @classmethod
    def restored(cls, config: ShareGroupConfig, start_offset: int, state_epoch: int,
                 batches: Iterable[StateBatch]) -> "SharePartition":
        """The share-partition a persisted snapshot describes (records AVAILABLE again keep their count;
        one that reached the delivery limit is archived)."""
        sp = cls(config, start_offset, state_epoch=state_epoch)
        for b in sorted(batches, key=lambda b: b.first_offset):
            for offset in range(max(b.first_offset, sp.end_offset), b.last_offset + 1):
                for gap in range(sp.end_offset, offset):
                    sp.records[gap] = InFlightRecord(AVAILABLE)
                rec = InFlightRecord(b.state, b.delivery_count)
                if rec.state == ACQUIRED:
                    sp._release(rec)
                sp.records[offset] = rec
                sp.end_offset = offset + 1
        sp._advance()
        return sp
