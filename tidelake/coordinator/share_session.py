"""Share sessions (KIP-932): the partitions a share consumer fetches, kept between its ShareFetch requests.

A session belongs to a (group, member). Epoch 0 opens it (replacing an old one) with the request's
partitions; each later request carries the next epoch, adds its partitions and drops the forgotten ones;
epoch -1 closes it (after its acknowledgements are applied, the member's acquired records are released).
ShareAcknowledge carries the session epoch too, and moves it on the same way.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tidelake import errors

OPEN_EPOCH, CLOSE_EPOCH = 0, -1

TopicPartitionId = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: list[TopicPartitionId] = field(default_factory=list)  # in the order first requested


class ShareSessionCache:
    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def advance(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request with ``epoch`` continues (a new one for epoch 0, the closing one for -1).
        Raises ShareSessionNotFound or InvalidShareSessionEpoch, Kafka's answers."""
        key = (group_id, member_id)
        if epoch == OPEN_EPOCH:
            session = ShareSession(group_id, member_id)
            self.sessions[key] = session
            return session
        session = self.sessions.get(key)
        if session is None:
            raise errors.ShareSessionNotFound(f"no share session for member {member_id} of group {group_id}")
        if epoch == CLOSE_EPOCH:
            del self.sessions[key]
            return session
        if epoch != session.next_epoch:
            raise errors.InvalidShareSessionEpoch(f"share session of member {member_id} expects epoch "
                                                  f"{session.next_epoch}, got {epoch}")
        session.next_epoch += 1
        return session

    def drop_member(self, group_id: str, member_id: str) -> None:
        self.sessions.pop((group_id, member_id), None)
