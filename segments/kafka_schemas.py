"""Our transcription of Kafka's message schemas, as data for :mod:`segments.kafka_messages`.

Transcribed field by field from the JSON schema files of Kafka's source tree (the directory of each group is
named in its heading); names, types, version ranges, nullable and tagged versions, tags and defaults are
Kafka's, documentation strings are left out. Lookup tables at the end map what names a message on disk: the
apiKey of a KRaft metadata record, the record type (key version) of a ``__consumer_offsets`` record.
"""

from __future__ import annotations

from segments.kafka_messages import MessageSchema
from segments.kafka_messages import field_spec as _f
from segments.kafka_messages import message_spec as _message

# --- KRaft metadata records (metadata/src/main/resources/common/metadata), by apiKey

ABORT_TRANSACTION_RECORD = _message("AbortTransactionRecord", 25, "0", "0+", (
    _f("Reason", "string", "0+", nullable="0+", tag=0, tagged="0+", default="null"),
))

ACCESS_CONTROL_ENTRY_RECORD = _message("AccessControlEntryRecord", 18, "0", "0+", (
    _f("Id", "uuid", "0+"),
    _f("ResourceType", "int8", "0+"),
    _f("ResourceName", "string", "0+"),
    _f("PatternType", "int8", "0+"),
    _f("Principal", "string", "0+"),
    _f("Host", "string", "0+"),
    _f("Operation", "int8", "0+"),
    _f("PermissionType", "int8", "0+"),
))

BEGIN_TRANSACTION_RECORD = _message("BeginTransactionRecord", 23, "0", "0+", (
    _f("Name", "string", "0+", nullable="0+", tag=0, tagged="0+", default="null"),
))

BROKER_REGISTRATION_CHANGE_RECORD = _message("BrokerRegistrationChangeRecord", 17, "0-2", "0+", (
    _f("BrokerId", "int32", "0+"),
    _f("BrokerEpoch", "int64", "0+"),
    _f("Fenced", "int8", "0+", tag=0, tagged="0+"),
    _f("InControlledShutdown", "int8", "1+", tag=1, tagged="1+"),
    _f("LogDirs", "[]uuid", "2+", tag=2, tagged="2+"),
))

CLIENT_QUOTA_RECORD = _message("ClientQuotaRecord", 14, "0", "0+", (
    _f("Entity", "[]EntityData", "0+", fields=(
        _f("EntityType", "string", "0+"),
        _f("EntityName", "string", "0+", nullable="0+"),
    )),
    _f("Key", "string", "0+"),
    _f("Value", "float64", "0+"),
    _f("Remove", "bool", "0+"),
))

CONFIG_RECORD = _message("ConfigRecord", 4, "0", "0+", (
    _f("ResourceType", "int8", "0+"),
    _f("ResourceName", "string", "0+"),
    _f("Name", "string", "0+"),
    _f("Value", "string", "0+", nullable="0+"),
))

DELEGATION_TOKEN_RECORD = _message("DelegationTokenRecord", 10, "0", "0+", (
    _f("Owner", "string", "0+"),
    _f("Requester", "string", "0+"),
    _f("Renewers", "[]string", "0+"),
    _f("IssueTimestamp", "int64", "0+"),
    _f("MaxTimestamp", "int64", "0+"),
    _f("ExpirationTimestamp", "int64", "0+"),
    _f("TokenId", "string", "0+"),
))

END_TRANSACTION_RECORD = _message("EndTransactionRecord", 24, "0", "0+", (
))

FEATURE_LEVEL_RECORD = _message("FeatureLevelRecord", 12, "0", "0+", (
    _f("Name", "string", "0+"),
    _f("FeatureLevel", "int16", "0+"),
))

FENCE_BROKER_RECORD = _message("FenceBrokerRecord", 7, "0", "0+", (
    _f("Id", "int32", "0+"),
    _f("Epoch", "int64", "0+"),
))

NO_OP_RECORD = _message("NoOpRecord", 20, "0", "0+", (
))

PARTITION_CHANGE_RECORD = _message("PartitionChangeRecord", 5, "0-2", "0+", (
    _f("PartitionId", "int32", "0+", default="-1"),
    _f("TopicId", "uuid", "0+"),
    _f("Isr", "[]int32", "0+", nullable="0+", tag=0, tagged="0+", default="null"),
    _f("Leader", "int32", "0+", tag=1, tagged="0+", default="-2"),
    _f("Replicas", "[]int32", "0+", nullable="0+", tag=2, tagged="0+", default="null"),
    _f("RemovingReplicas", "[]int32", "0+", nullable="0+", tag=3, tagged="0+", default="null"),
    _f("AddingReplicas", "[]int32", "0+", nullable="0+", tag=4, tagged="0+", default="null"),
    _f("LeaderRecoveryState", "int8", "0+", tag=5, tagged="0+", default="-1"),
    _f("Directories", "[]uuid", "1+", nullable="1+", tag=8, tagged="1+", default="null"),
    _f("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=6, tagged="2+", default="null"),
    _f("LastKnownElr", "[]int32", "2+", nullable="2+", tag=7, tagged="2+", default="null"),
))

PARTITION_RECORD = _message("PartitionRecord", 3, "0-2", "0+", (
    _f("PartitionId", "int32", "0+", default="-1"),
    _f("TopicId", "uuid", "0+"),
    _f("Replicas", "[]int32", "0+"),
    _f("Isr", "[]int32", "0+"),
    _f("RemovingReplicas", "[]int32", "0+"),
    _f("AddingReplicas", "[]int32", "0+"),
    _f("Leader", "int32", "0+", default="-1"),
    _f("LeaderRecoveryState", "int8", "0+", tag=0, tagged="0+", default="0"),
    _f("LeaderEpoch", "int32", "0+", default="-1"),
    _f("PartitionEpoch", "int32", "0+", default="-1"),
    _f("Directories", "[]uuid", "1+"),
    _f("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=1, tagged="2+", default="null"),
    _f("LastKnownElr", "[]int32", "2+", nullable="2+", tag=2, tagged="2+", default="null"),
))

PRODUCER_IDS_RECORD = _message("ProducerIdsRecord", 15, "0", "0+", (
    _f("BrokerId", "int32", "0+"),
    _f("BrokerEpoch", "int64", "0+", default="-1"),
    _f("NextProducerId", "int64", "0+"),
))

REGISTER_BROKER_RECORD = _message("RegisterBrokerRecord", 0, "0-3", "0+", (
    _f("BrokerId", "int32", "0+"),
    _f("IsMigratingZkBroker", "bool", "2+", default="false"),
    _f("IncarnationId", "uuid", "0+"),
    _f("BrokerEpoch", "int64", "0+"),
    _f("EndPoints", "[]BrokerEndpoint", "0+", fields=(
        _f("Name", "string", "0+"),
        _f("Host", "string", "0+"),
        _f("Port", "uint16", "0+"),
        _f("SecurityProtocol", "int16", "0+"),
    )),
    _f("Features", "[]BrokerFeature", "0+", fields=(
        _f("Name", "string", "0+"),
        _f("MinSupportedVersion", "int16", "0+"),
        _f("MaxSupportedVersion", "int16", "0+"),
    )),
    _f("Rack", "string", "0+", nullable="0+"),
    _f("Fenced", "bool", "0+", default="true"),
    _f("InControlledShutdown", "bool", "1+", default="false"),
    _f("LogDirs", "[]uuid", "3+", tag=0, tagged="3+"),
))

REGISTER_CONTROLLER_RECORD = _message("RegisterControllerRecord", 27, "0", "0+", (
    _f("ControllerId", "int32", "0+"),
    _f("IncarnationId", "uuid", "0+"),
    _f("ZkMigrationReady", "bool", "0+"),
    _f("EndPoints", "[]ControllerEndpoint", "0+", fields=(
        _f("Name", "string", "0+"),
        _f("Host", "string", "0+"),
        _f("Port", "uint16", "0+"),
        _f("SecurityProtocol", "int16", "0+"),
    )),
    _f("Features", "[]ControllerFeature", "0+", fields=(
        _f("Name", "string", "0+"),
        _f("MinSupportedVersion", "int16", "0+"),
        _f("MaxSupportedVersion", "int16", "0+"),
    )),
))

REMOVE_ACCESS_CONTROL_ENTRY_RECORD = _message("RemoveAccessControlEntryRecord", 19, "0", "0+", (
    _f("Id", "uuid", "0+"),
))

REMOVE_DELEGATION_TOKEN_RECORD = _message("RemoveDelegationTokenRecord", 26, "0", "0+", (
    _f("TokenId", "string", "0+"),
))

REMOVE_TOPIC_RECORD = _message("RemoveTopicRecord", 9, "0", "0+", (
    _f("TopicId", "uuid", "0+"),
))

REMOVE_USER_SCRAM_CREDENTIAL_RECORD = _message("RemoveUserScramCredentialRecord", 22, "0", "0+", (
    _f("Name", "string", "0+"),
    _f("Mechanism", "int8", "0+"),
))

TOPIC_RECORD = _message("TopicRecord", 2, "0", "0+", (
    _f("Name", "string", "0+"),
    _f("TopicId", "uuid", "0+"),
))

UNFENCE_BROKER_RECORD = _message("UnfenceBrokerRecord", 8, "0", "0+", (
    _f("Id", "int32", "0+"),
    _f("Epoch", "int64", "0+"),
))

UNREGISTER_BROKER_RECORD = _message("UnregisterBrokerRecord", 1, "0", "0+", (
    _f("BrokerId", "int32", "0+"),
    _f("BrokerEpoch", "int64", "0+"),
))

USER_SCRAM_CREDENTIAL_RECORD = _message("UserScramCredentialRecord", 11, "0", "0+", (
    _f("Name", "string", "0+"),
    _f("Mechanism", "int8", "0+"),
    _f("Salt", "bytes", "0+"),
    _f("StoredKey", "bytes", "0+"),
    _f("ServerKey", "bytes", "0+"),
    _f("Iterations", "int32", "0+"),
))

ZK_MIGRATION_STATE_RECORD = _message("ZkMigrationStateRecord", 21, "0", "0+", (
    _f("ZkMigrationState", "int8", "0+"),
))

# --- KRaft control records (clients/src/main/resources/common/message)

LEADER_CHANGE_MESSAGE = _message("LeaderChangeMessage", None, "0-1", "0+", (
    _f("Version", "int16", "0+"),
    _f("LeaderId", "int32", "0+"),
    _f("Voters", "[]Voter", "0+", fields=(
        _f("VoterId", "int32", "0+"),
        _f("VoterDirectoryId", "uuid", "1+"),
    )),
    _f("GrantingVoters", "[]Voter", "0+", fields=(
        _f("VoterId", "int32", "0+"),
        _f("VoterDirectoryId", "uuid", "1+"),
    )),
))

SNAPSHOT_HEADER_RECORD = _message("SnapshotHeaderRecord", None, "0", "0+", (
    _f("Version", "int16", "0+"),
    _f("LastContainedLogTimestamp", "int64", "0+"),
))

SNAPSHOT_FOOTER_RECORD = _message("SnapshotFooterRecord", None, "0", "0+", (
    _f("Version", "int16", "0+"),
))

KRAFT_VERSION_RECORD = _message("KRaftVersionRecord", None, "0", "0+", (
    _f("Version", "int16", "0+"),
    _f("KRaftVersion", "int16", "0+"),
))

VOTERS_RECORD = _message("VotersRecord", None, "0", "0+", (
    _f("Version", "int16", "0+"),
    _f("Voters", "[]Voter", "0+", fields=(
        _f("VoterId", "int32", "0+"),
        _f("VoterDirectoryId", "uuid", "0+"),
        _f("Endpoints", "[]Endpoint", "0+", fields=(
            _f("Name", "string", "0+"),
            _f("Host", "string", "0+"),
            _f("Port", "uint16", "0+"),
        )),
        _f("KRaftVersionFeature", "KRaftVersionFeature", "0+", fields=(
            _f("MinSupportedVersion", "int16", "0+"),
            _f("MaxSupportedVersion", "int16", "0+"),
        )),
    )),
))

# --- __consumer_offsets keys and values (group-coordinator/src/main/resources/common/message)

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _message("ConsumerGroupCurrentMemberAssignmentKey", None, "8", "none", (
    _f("GroupId", "string", "8"),
    _f("MemberId", "string", "8"),
))

CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _message("ConsumerGroupCurrentMemberAssignmentValue", None, "0", "0+", (
    _f("MemberEpoch", "int32", "0+"),
    _f("PreviousMemberEpoch", "int32", "0+"),
    _f("State", "int8", "0+"),
    _f("AssignedPartitions", "[]TopicPartitions", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("Partitions", "[]int32", "0+"),
    )),
    _f("PartitionsPendingRevocation", "[]TopicPartitions", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("Partitions", "[]int32", "0+"),
    )),
))

CONSUMER_GROUP_MEMBER_METADATA_KEY = _message("ConsumerGroupMemberMetadataKey", None, "5", "none", (
    _f("GroupId", "string", "5"),
    _f("MemberId", "string", "5"),
))

CONSUMER_GROUP_MEMBER_METADATA_VALUE = _message("ConsumerGroupMemberMetadataValue", None, "0", "0+", (
    _f("InstanceId", "string", "0+", nullable="0+"),
    _f("RackId", "string", "0+", nullable="0+"),
    _f("ClientId", "string", "0+"),
    _f("ClientHost", "string", "0+"),
    _f("SubscribedTopicNames", "[]string", "0+"),
    _f("SubscribedTopicRegex", "string", "0+", nullable="0+"),
    _f("RebalanceTimeoutMs", "int32", "0+", default="-1"),
    _f("ServerAssignor", "string", "0+", nullable="0+"),
    _f("ClassicMemberMetadata", "ClassicMemberMetadata", "0+", nullable="0+", tag=0, tagged="0+", default="null", fields=(
        _f("SessionTimeoutMs", "int32", "0+"),
        _f("SupportedProtocols", "[]ClassicProtocol", "0+", fields=(
            _f("Name", "string", "0+"),
            _f("Metadata", "bytes", "0+"),
        )),
    )),
))

CONSUMER_GROUP_METADATA_KEY = _message("ConsumerGroupMetadataKey", None, "3", "none", (
    _f("GroupId", "string", "3"),
))

CONSUMER_GROUP_METADATA_VALUE = _message("ConsumerGroupMetadataValue", None, "0", "0+", (
    _f("Epoch", "int32", "0+"),
))

CONSUMER_GROUP_PARTITION_METADATA_KEY = _message("ConsumerGroupPartitionMetadataKey", None, "4", "none", (
    _f("GroupId", "string", "4"),
))

CONSUMER_GROUP_PARTITION_METADATA_VALUE = _message("ConsumerGroupPartitionMetadataValue", None, "0", "0+", (
    _f("Topics", "[]TopicMetadata", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("TopicName", "string", "0+"),
        _f("NumPartitions", "int32", "0+"),
        _f("PartitionMetadata", "[]PartitionMetadata", "0+", fields=(
            _f("Partition", "int32", "0+"),
            _f("Racks", "[]string", "0+"),
        )),
    )),
))

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _message("ConsumerGroupTargetAssignmentMemberKey", None, "7", "none", (
    _f("GroupId", "string", "7"),
    _f("MemberId", "string", "7"),
))

CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _message("ConsumerGroupTargetAssignmentMemberValue", None, "0", "0+", (
    _f("TopicPartitions", "[]TopicPartition", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("Partitions", "[]int32", "0+"),
    )),
))

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _message("ConsumerGroupTargetAssignmentMetadataKey", None, "6", "none", (
    _f("GroupId", "string", "6"),
))

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _message("ConsumerGroupTargetAssignmentMetadataValue", None, "0", "0+", (
    _f("AssignmentEpoch", "int32", "0+"),
))

GROUP_METADATA_KEY = _message("GroupMetadataKey", None, "2", "none", (
    _f("group", "string", "2"),
))

GROUP_METADATA_VALUE = _message("GroupMetadataValue", None, "0-4", "4+", (
    _f("protocolType", "string", "0+"),
    _f("generation", "int32", "0+"),
    _f("protocol", "string", "0+", nullable="0+"),
    _f("leader", "string", "0+", nullable="0+"),
    _f("currentStateTimestamp", "int64", "2+", default="-1"),
    _f("members", "[]MemberMetadata", "0+", fields=(
        _f("memberId", "string", "0+"),
        _f("groupInstanceId", "string", "3+", nullable="3+", default="null"),
        _f("clientId", "string", "0+"),
        _f("clientHost", "string", "0+"),
        _f("rebalanceTimeout", "int32", "1+", default="-1"),
        _f("sessionTimeout", "int32", "0+"),
        _f("subscription", "bytes", "0+"),
        _f("assignment", "bytes", "0+"),
    )),
))

OFFSET_COMMIT_KEY = _message("OffsetCommitKey", None, "0-1", "none", (
    _f("group", "string", "0-1"),
    _f("topic", "string", "0-1"),
    _f("partition", "int32", "0-1"),
))

OFFSET_COMMIT_VALUE = _message("OffsetCommitValue", None, "0-4", "4+", (
    _f("offset", "int64", "0+"),
    _f("leaderEpoch", "int32", "3+", default="-1"),
    _f("metadata", "string", "0+"),
    _f("commitTimestamp", "int64", "0+"),
    _f("expireTimestamp", "int64", "1", default="-1"),
))

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = _message("ShareGroupCurrentMemberAssignmentKey", None, "14", "none", (
    _f("GroupId", "string", "14"),
    _f("MemberId", "string", "14"),
))

SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = _message("ShareGroupCurrentMemberAssignmentValue", None, "0", "0+", (
    _f("MemberEpoch", "int32", "0+"),
    _f("PreviousMemberEpoch", "int32", "0+"),
    _f("State", "int8", "0+"),
    _f("AssignedPartitions", "[]TopicPartitions", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("Partitions", "[]int32", "0+"),
    )),
))

SHARE_GROUP_MEMBER_METADATA_KEY = _message("ShareGroupMemberMetadataKey", None, "10", "none", (
    _f("GroupId", "string", "10"),
    _f("MemberId", "string", "10"),
))

SHARE_GROUP_MEMBER_METADATA_VALUE = _message("ShareGroupMemberMetadataValue", None, "0", "0+", (
    _f("RackId", "string", "0+", nullable="0+"),
    _f("ClientId", "string", "0+"),
    _f("ClientHost", "string", "0+"),
    _f("SubscribedTopicNames", "[]string", "0+"),
))

SHARE_GROUP_METADATA_KEY = _message("ShareGroupMetadataKey", None, "11", "none", (
    _f("GroupId", "string", "11"),
))

SHARE_GROUP_METADATA_VALUE = _message("ShareGroupMetadataValue", None, "0", "0+", (
    _f("Epoch", "int32", "0+"),
))

SHARE_GROUP_PARTITION_METADATA_KEY = _message("ShareGroupPartitionMetadataKey", None, "9", "none", (
    _f("GroupId", "string", "9"),
))

SHARE_GROUP_PARTITION_METADATA_VALUE = _message("ShareGroupPartitionMetadataValue", None, "0", "0+", (
    _f("Topics", "[]TopicMetadata", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("TopicName", "string", "0+"),
        _f("NumPartitions", "int32", "0+"),
        _f("PartitionMetadata", "[]PartitionMetadata", "0+", fields=(
            _f("Partition", "int32", "0+"),
            _f("Racks", "[]string", "0+"),
        )),
    )),
))

SHARE_GROUP_STATE_PARTITION_METADATA_KEY = _message("ShareGroupStatePartitionMetadataKey", None, "15", "none", (
    _f("GroupId", "string", "15"),
))

SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = _message("ShareGroupStatePartitionMetadataValue", None, "0", "0+", (
    _f("InitializedTopics", "[]TopicPartitionsInfo", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("TopicName", "string", "0+"),
        _f("Partitions", "[]int32", "0+"),
    )),
    _f("DeletingTopics", "[]TopicInfo", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("TopicName", "string", "0+"),
    )),
))

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = _message("ShareGroupTargetAssignmentMemberKey", None, "13", "none", (
    _f("GroupId", "string", "13"),
    _f("MemberId", "string", "13"),
))

SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = _message("ShareGroupTargetAssignmentMemberValue", None, "0", "0+", (
    _f("TopicPartitions", "[]TopicPartition", "0+", fields=(
        _f("TopicId", "uuid", "0+"),
        _f("Partitions", "[]int32", "0+"),
    )),
))

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = _message("ShareGroupTargetAssignmentMetadataKey", None, "12", "none", (
    _f("GroupId", "string", "12"),
))

SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = _message("ShareGroupTargetAssignmentMetadataValue", None, "0", "0+", (
    _f("AssignmentEpoch", "int32", "0+"),
))

# --- The consumer embedded protocol inside GroupMetadataValue members (clients/src/main/resources/common/message)

CONSUMER_PROTOCOL_SUBSCRIPTION = _message("ConsumerProtocolSubscription", None, "0-3", "none", (
    _f("Topics", "[]string", "0+"),
    _f("UserData", "bytes", "0+", nullable="0+", default="null", zero_copy=True),
    _f("OwnedPartitions", "[]TopicPartition", "1+", fields=(
        _f("Topic", "string", "1+"),
        _f("Partitions", "[]int32", "1+"),
    )),
    _f("GenerationId", "int32", "2+", default="-1"),
    _f("RackId", "string", "3+", nullable="3+", default="null"),
))

CONSUMER_PROTOCOL_ASSIGNMENT = _message("ConsumerProtocolAssignment", None, "0-3", "none", (
    _f("AssignedPartitions", "[]TopicPartition", "0+", fields=(
        _f("Topic", "string", "0+"),
        _f("Partitions", "[]int32", "0+"),
    )),
    _f("UserData", "bytes", "0+", nullable="0+", default="null", zero_copy=True),
))

# --- __transaction_state key and value (transaction-coordinator/src/main/resources/common/message)

TRANSACTION_LOG_KEY = _message("TransactionLogKey", None, "0", "none", (
    _f("TransactionalId", "string", "0"),
))

TRANSACTION_LOG_VALUE = _message("TransactionLogValue", None, "0-1", "1+", (
    _f("ProducerId", "int64", "0+"),
    _f("PreviousProducerId", "int64", "1+", tag=0, tagged="1+", default="-1"),
    _f("NextProducerId", "int64", "1+", tag=1, tagged="1+", default="-1"),
    _f("ProducerEpoch", "int16", "0+"),
    _f("TransactionTimeoutMs", "int32", "0+"),
    _f("TransactionStatus", "int8", "0+"),
    _f("TransactionPartitions", "[]PartitionsSchema", "0+", nullable="0+", fields=(
        _f("Topic", "string", "0+"),
        _f("PartitionIds", "[]int32", "0+"),
    )),
    _f("TransactionLastUpdateTimestampMs", "int64", "0+"),
    _f("TransactionStartTimestampMs", "int64", "0+"),
    _f("ClientTransactionVersion", "int16", "1+", tag=2, tagged="1+", default="0"),
))

# --- __share_group_state keys and values (share-coordinator/src/main/resources/common/message)

SHARE_SNAPSHOT_KEY = _message("ShareSnapshotKey", None, "0", "none", (
    _f("GroupId", "string", "0"),
    _f("TopicId", "uuid", "0"),
    _f("Partition", "int32", "0"),
))

SHARE_SNAPSHOT_VALUE = _message("ShareSnapshotValue", None, "0", "0+", (
    _f("SnapshotEpoch", "uint16", "0"),
    _f("StateEpoch", "int32", "0+"),
    _f("LeaderEpoch", "int32", "0+"),
    _f("StartOffset", "int64", "0"),
    _f("StateBatches", "[]StateBatch", "0", fields=(
        _f("FirstOffset", "int64", "0"),
        _f("LastOffset", "int64", "0"),
        _f("DeliveryState", "int8", "0"),
        _f("DeliveryCount", "int16", "0"),
    )),
))

SHARE_UPDATE_KEY = _message("ShareUpdateKey", None, "1", "none", (
    _f("GroupId", "string", "1"),
    _f("TopicId", "uuid", "1"),
    _f("Partition", "int32", "1"),
))

SHARE_UPDATE_VALUE = _message("ShareUpdateValue", None, "0", "0+", (
    _f("SnapshotEpoch", "uint16", "0"),
    _f("LeaderEpoch", "int32", "0+"),
    _f("StartOffset", "int64", "0"),
    _f("StateBatches", "[]StateBatch", "0", fields=(
        _f("FirstOffset", "int64", "0"),
        _f("LastOffset", "int64", "0"),
        _f("DeliveryState", "int8", "0"),
        _f("DeliveryCount", "int16", "0"),
    )),
))

# --- Lookup tables

METADATA_RECORDS: dict[int, MessageSchema] = {
    schema.api_key: schema
    for schema in (
        ABORT_TRANSACTION_RECORD, ACCESS_CONTROL_ENTRY_RECORD, BEGIN_TRANSACTION_RECORD,
        BROKER_REGISTRATION_CHANGE_RECORD, CLIENT_QUOTA_RECORD, CONFIG_RECORD, DELEGATION_TOKEN_RECORD,
        END_TRANSACTION_RECORD, FEATURE_LEVEL_RECORD, FENCE_BROKER_RECORD, NO_OP_RECORD, PARTITION_CHANGE_RECORD,
        PARTITION_RECORD, PRODUCER_IDS_RECORD, REGISTER_BROKER_RECORD, REGISTER_CONTROLLER_RECORD,
        REMOVE_ACCESS_CONTROL_ENTRY_RECORD, REMOVE_DELEGATION_TOKEN_RECORD, REMOVE_TOPIC_RECORD,
        REMOVE_USER_SCRAM_CREDENTIAL_RECORD, TOPIC_RECORD, UNFENCE_BROKER_RECORD, UNREGISTER_BROKER_RECORD,
        USER_SCRAM_CREDENTIAL_RECORD, ZK_MIGRATION_STATE_RECORD,
    )
    if schema.api_key is not None
}
"""KRaft metadata records by apiKey (``MetadataRecordType``)."""

GROUP_COORDINATOR_RECORDS: dict[int, tuple[MessageSchema, MessageSchema]] = {
    0: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
    3: (CONSUMER_GROUP_METADATA_KEY, CONSUMER_GROUP_METADATA_VALUE),
    4: (CONSUMER_GROUP_PARTITION_METADATA_KEY, CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    5: (CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    6: (CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    7: (CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: (CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    9: (SHARE_GROUP_PARTITION_METADATA_KEY, SHARE_GROUP_PARTITION_METADATA_VALUE),
    10: (SHARE_GROUP_MEMBER_METADATA_KEY, SHARE_GROUP_MEMBER_METADATA_VALUE),
    11: (SHARE_GROUP_METADATA_KEY, SHARE_GROUP_METADATA_VALUE),
    12: (SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    13: (SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    14: (SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    15: (SHARE_GROUP_STATE_PARTITION_METADATA_KEY, SHARE_GROUP_STATE_PARTITION_METADATA_VALUE),
}
"""``__consumer_offsets`` key and value schemas by record type, the int16 that prefixes the key
(``GroupCoordinatorRecordSerde``; the key is read with the record type as its version)."""

ALL_SCHEMAS: tuple[MessageSchema, ...] = tuple(
    value for value in dict(globals()).values() if isinstance(value, MessageSchema)
)
"""Every transcribed schema (for tests that go over all of them)."""
