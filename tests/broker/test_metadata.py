"""The broker's metadata file: topics, configs and producer ids, persisted atomically."""
from __future__ import annotations

import asyncio

from tidelake.broker.metadata import PRODUCER_ID_BLOCK, MetadataStore, TopicInfo


def test_metadata_store_save_async_writes_on_a_worker_thread_and_never_goes_back(tmp_path):
    m = MetadataStore(tmp_path)
    m.add_topic(TopicInfo("late", 1), save=False)
    assert "late" not in MetadataStore(tmp_path).topics  # not on disk until saved
    asyncio.run(m.save_async())
    assert "late" in MetadataStore(tmp_path).topics
    stale = m._serialize()  # a state serialised before the next change...
    m.add_topic(TopicInfo("newer", 1))
    m._write(*stale)  # ...and written after it (a slow worker) does not replace the newer state
    assert set(MetadataStore(tmp_path).topics) == {"late", "newer"}


def test_metadata_store_persists_topics_and_producer_ids_are_monotonic(tmp_path):
    m = MetadataStore(tmp_path)
    m.add_topic(TopicInfo("a", 3, {"retention.ms": "5"}))
    ids = [m.allocate_producer_id() for _ in range(3)]
    assert ids == [0, 1, 2]
    m2 = MetadataStore(tmp_path)  # as after a crash: ids of the reserved block are never reused
    assert m2.topics["a"].partitions == 3 and m2.topics["a"].configs == {"retention.ms": "5"}
    assert m2.topics["a"].topic_id == m.topics["a"].topic_id
    assert m2.allocate_producer_id() >= PRODUCER_ID_BLOCK
