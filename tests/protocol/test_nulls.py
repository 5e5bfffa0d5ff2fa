"""Spec nullability on decoded requests (``tidelake.protocol.nulls``)."""
from __future__ import annotations

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest as OC

from tidelake.protocol.nulls import NullChecks


def _decoded(request, version):
    return type(request).decode(request.encode(version=version), version=version)


def test_null_in_a_non_nullable_field_is_named_nullable_ones_pass():
    checks = NullChecks()
    part = OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                                     committed_metadata=None)  # nullable
    ok = OC(group_id="g", generation_id_or_member_epoch=1, member_id="m", group_instance_id=None,
            retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(name="t", partitions=[part])])
    for version in (2, 7, 8, 9):
        assert checks.find(OC, version, _decoded(ok, version)) is None
        no_topics = OC(group_id="g", generation_id_or_member_epoch=1, member_id="m", retention_time_ms=-1,
                       topics=None)
        assert checks.find(OC, version, _decoded(no_topics, version)) == "topics"
    nested = OC(group_id="g", generation_id_or_member_epoch=1, member_id="m", retention_time_ms=-1,
                topics=[OC.OffsetCommitRequestTopic(name=None, partitions=[part])])
    assert checks.find(OC, 8, _decoded(nested, 8)) == "topics.name"


def test_nullable_versions_follow_the_spec():
    # CreateTopics' ReplicaAssignment broker ids are not nullable; Configs' Value is (0+)
    checks = NullChecks()
    ct = CreateTopicsRequest.CreatableTopic
    topic = ct(name="t", num_partitions=1, replication_factor=1, assignments=[],
               configs=[ct.CreatableTopicConfig(name="cleanup.policy", value=None)])
    req = CreateTopicsRequest(topics=[topic], timeout_ms=1000, validate_only=False)
    assert checks.find(CreateTopicsRequest, 5, _decoded(req, 5)) is None
    topic.assignments = None
    assert checks.find(CreateTopicsRequest, 5, _decoded(req, 5)) == "topics.assignments"
