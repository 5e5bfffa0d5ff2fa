"""Kafka's protocol error codes, as exceptions: the one place the codes are declared.

Codes are Kafka's (see kafka.errors in kafka-python for the full table). Layers below the broker
raise these; the broker turns them into the error_code of the response. Handlers that answer an
error without raising one read the code from the class (``errors.UnknownTopicId.code``).
"""
from __future__ import annotations


class KafkaApiError(Exception):
    code = -1  # UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: int | None = None):
        super().__init__(message or self.__class__.__name__)
        if code is not None:
            self.code = code


def _err(name: str, code: int) -> type[KafkaApiError]:
    return type(name, (KafkaApiError,), {"code": code})


NONE = 0  # no error

OffsetOutOfRange = _err("OffsetOutOfRange", 1)
CorruptMessage = _err("CorruptMessage", 2)
UnknownTopicOrPartition = _err("UnknownTopicOrPartition", 3)
InvalidFetchSize = _err("InvalidFetchSize", 4)
LeaderNotAvailable = _err("LeaderNotAvailable", 5)
NotLeaderOrFollower = _err("NotLeaderOrFollower", 6)
RequestTimedOut = _err("RequestTimedOut", 7)
BrokerNotAvailable = _err("BrokerNotAvailable", 8)
ReplicaNotAvailable = _err("ReplicaNotAvailable", 9)
MessageTooLarge = _err("MessageTooLarge", 10)
StaleControllerEpoch = _err("StaleControllerEpoch", 11)
CoordinatorLoadInProgress = _err("CoordinatorLoadInProgress", 14)
CoordinatorNotAvailable = _err("CoordinatorNotAvailable", 15)
NotCoordinator = _err("NotCoordinator", 16)
InvalidTopic = _err("InvalidTopic", 17)
RecordListTooLarge = _err("RecordListTooLarge", 18)
NotEnoughReplicas = _err("NotEnoughReplicas", 19)
NotEnoughReplicasAfterAppend = _err("NotEnoughReplicasAfterAppend", 20)
InvalidRequiredAcks = _err("InvalidRequiredAcks", 21)
IllegalGeneration = _err("IllegalGeneration", 22)
InconsistentGroupProtocol = _err("InconsistentGroupProtocol", 23)
InvalidGroupId = _err("InvalidGroupId", 24)
UnknownMemberId = _err("UnknownMemberId", 25)
InvalidSessionTimeout = _err("InvalidSessionTimeout", 26)
RebalanceInProgress = _err("RebalanceInProgress", 27)
InvalidCommitOffsetSize = _err("InvalidCommitOffsetSize", 28)
OffsetMetadataTooLarge = _err("OffsetMetadataTooLarge", 12)
InvalidTimestamp = _err("InvalidTimestamp", 32)
UnsupportedVersion = _err("UnsupportedVersion", 35)
TopicAlreadyExists = _err("TopicAlreadyExists", 36)
InvalidPartitions = _err("InvalidPartitions", 37)
InvalidReplicationFactor = _err("InvalidReplicationFactor", 38)
InvalidReplicaAssignment = _err("InvalidReplicaAssignment", 39)
InvalidConfig = _err("InvalidConfig", 40)
NotController = _err("NotController", 41)
InvalidRequest = _err("InvalidRequest", 42)
PolicyViolation = _err("PolicyViolation", 44)
OutOfOrderSequenceNumber = _err("OutOfOrderSequenceNumber", 45)
DuplicateSequenceNumber = _err("DuplicateSequenceNumber", 46)
InvalidProducerEpoch = _err("InvalidProducerEpoch", 47)
InvalidTxnState = _err("InvalidTxnState", 48)
InvalidProducerIdMapping = _err("InvalidProducerIdMapping", 49)
InvalidTransactionTimeout = _err("InvalidTransactionTimeout", 50)
ConcurrentTransactions = _err("ConcurrentTransactions", 51)
TransactionCoordinatorFenced = _err("TransactionCoordinatorFenced", 52)
KafkaStorageError = _err("KafkaStorageError", 56)  # a log file could not be written (a full disk)
OperationNotAttempted = _err("OperationNotAttempted", 55)
UnknownServerError = _err("UnknownServerError", -1)
NonEmptyGroup = _err("NonEmptyGroup", 68)
GroupIdNotFound = _err("GroupIdNotFound", 69)
FetchSessionIdNotFound = _err("FetchSessionIdNotFound", 70)
InvalidFetchSessionEpoch = _err("InvalidFetchSessionEpoch", 71)
TopicDeletionDisabled = _err("TopicDeletionDisabled", 73)
FencedLeaderEpoch = _err("FencedLeaderEpoch", 74)
StaleBrokerEpoch = _err("StaleBrokerEpoch", 77)
UnknownLeaderEpoch = _err("UnknownLeaderEpoch", 75)
GroupSubscribedToTopic = _err("GroupSubscribedToTopic", 86)
MemberIdRequired = _err("MemberIdRequired", 79)
FencedInstanceId = _err("FencedInstanceId", 82)
UnknownProducerId = _err("UnknownProducerId", 59)
PreferredLeaderNotAvailable = _err("PreferredLeaderNotAvailable", 80)
EligibleLeadersNotAvailable = _err("EligibleLeadersNotAvailable", 83)
ElectionNotNeeded = _err("ElectionNotNeeded", 84)
NoReassignmentInProgress = _err("NoReassignmentInProgress", 85)
UnstableOffsetCommit = _err("UnstableOffsetCommit", 88)
ProducerFenced = _err("ProducerFenced", 90)
InvalidUpdateVersion = _err("InvalidUpdateVersion", 95)  # KIP-584: a feature level UpdateFeatures cannot set
UnknownTopicId = _err("UnknownTopicId", 100)
TransactionalIdNotFound = _err("TransactionalIdNotFound", 105)
FencedMemberEpoch = _err("FencedMemberEpoch", 110)
UnreleasedInstanceId = _err("UnreleasedInstanceId", 111)
UnsupportedAssignor = _err("UnsupportedAssignor", 112)
UnsupportedEndpointType = _err("UnsupportedEndpointType", 119)
InvalidRecordState = _err("InvalidRecordState", 121)  # KIP-932: an acknowledgement for a record not acquired by the member
ShareSessionNotFound = _err("ShareSessionNotFound", 122)
InvalidShareSessionEpoch = _err("InvalidShareSessionEpoch", 123)
FencedStateEpoch = _err("FencedStateEpoch", 124)  # KIP-932: a share-state write older than the state held

# security (TLS, SASL, ACLs)
TopicAuthorizationFailed = _err("TopicAuthorizationFailed", 29)
GroupAuthorizationFailed = _err("GroupAuthorizationFailed", 30)
ClusterAuthorizationFailed = _err("ClusterAuthorizationFailed", 31)
UnsupportedSaslMechanism = _err("UnsupportedSaslMechanism", 33)
IllegalSaslState = _err("IllegalSaslState", 34)
TransactionalIdAuthorizationFailed = _err("TransactionalIdAuthorizationFailed", 53)
SecurityDisabled = _err("SecurityDisabled", 54)
SaslAuthenticationFailed = _err("SaslAuthenticationFailed", 58)
ResourceNotFound = _err("ResourceNotFound", 91)
DuplicateResource = _err("DuplicateResource", 92)
UnacceptableCredential = _err("UnacceptableCredential", 93)


class InvalidRecord(KafkaApiError):
    """Some records of a produce request are invalid (e.g. no key on a compacted topic); KIP-467:
    ``record_errors`` names each bad record by its index in the request's records (0-based, across
    batches) with a message, so the producer fails exactly those and may retry the others."""
    code = 87

    def __init__(self, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(message)
        self.record_errors = record_errors



def error_code(e: BaseException) -> int:
    """The Kafka error code reporting ``e``: its own for KafkaApiError, CORRUPT_MESSAGE for a
    record decoding error (records.CorruptRecordError and friends), else UNKNOWN_SERVER_ERROR."""
    if isinstance(e, KafkaApiError):
        return e.code
    if isinstance(e, ValueError):
        return CorruptMessage.code
    return UnknownServerError.code
