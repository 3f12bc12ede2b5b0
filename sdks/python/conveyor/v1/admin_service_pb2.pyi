from conveyor.v1 import task_pb2 as _task_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

BULK_ACTION_ARCHIVE: BulkAction
BULK_ACTION_CANCEL: BulkAction
BULK_ACTION_DELETE: BulkAction
BULK_ACTION_RETRY: BulkAction
BULK_ACTION_UNSPECIFIED: BulkAction
DESCRIPTOR: _descriptor.FileDescriptor
GROUP_STATE_AGGREGATING: GroupState
GROUP_STATE_READY: GroupState
GROUP_STATE_UNSPECIFIED: GroupState
MEMBER_STATE_ACTIVE: MemberState
MEMBER_STATE_DRAINING: MemberState
MEMBER_STATE_JOINING: MemberState
MEMBER_STATE_UNSPECIFIED: MemberState
MISSED_TICKS_LATEST: MissedTicks
MISSED_TICKS_SKIP: MissedTicks
MISSED_TICKS_UNSPECIFIED: MissedTicks

class ActivityBucket(_message.Message):
    __slots__ = ["archived", "completed", "enqueued", "retried", "start_ms"]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    ENQUEUED_FIELD_NUMBER: _ClassVar[int]
    RETRIED_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    archived: int
    completed: int
    enqueued: int
    retried: int
    start_ms: int
    def __init__(self, start_ms: _Optional[int] = ..., enqueued: _Optional[int] = ..., completed: _Optional[int] = ..., retried: _Optional[int] = ..., archived: _Optional[int] = ...) -> None: ...

class AdminServiceCancelTaskRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class AdminServiceCancelTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class AdminServiceGetTaskRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class AdminServiceGetTaskResponse(_message.Message):
    __slots__ = ["attempts", "task"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[_task_pb2.Attempt]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[_task_pb2.Attempt, _Mapping]]] = ...) -> None: ...

class ArchiveTaskRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ArchiveTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class BulkTaskActionRequest(_message.Message):
    __slots__ = ["action", "queue", "state"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    action: BulkAction
    queue: str
    state: _task_pb2.TaskState
    def __init__(self, queue: _Optional[str] = ..., state: _Optional[_Union[_task_pb2.TaskState, str]] = ..., action: _Optional[_Union[BulkAction, str]] = ...) -> None: ...

class BulkTaskActionResponse(_message.Message):
    __slots__ = ["affected"]
    AFFECTED_FIELD_NUMBER: _ClassVar[int]
    affected: int
    def __init__(self, affected: _Optional[int] = ...) -> None: ...

class ChangelogStatus(_message.Message):
    __slots__ = ["enabled", "error", "healthy", "leader", "standby_lag_entries", "standby_partitions", "stream"]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    STANDBY_LAG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    STANDBY_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    error: str
    healthy: bool
    leader: str
    standby_lag_entries: int
    standby_partitions: int
    stream: str
    def __init__(self, enabled: bool = ..., healthy: bool = ..., stream: _Optional[str] = ..., leader: _Optional[str] = ..., error: _Optional[str] = ..., standby_partitions: _Optional[int] = ..., standby_lag_entries: _Optional[int] = ...) -> None: ...

class ClusterMember(_message.Message):
    __slots__ = ["node_id", "self"]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    self: bool
    def __init__(self, node_id: _Optional[str] = ..., self: bool = ...) -> None: ...

class ClusterMemberStatus(_message.Message):
    __slots__ = ["drained", "grpc_address", "http_address", "incarnation", "lease_left_ms", "member_revision", "node_id", "partitions_owned", "self", "state", "version"]
    DRAINED_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HTTP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    LEASE_LEFT_MS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_REVISION_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_OWNED_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    drained: bool
    grpc_address: str
    http_address: str
    incarnation: str
    lease_left_ms: int
    member_revision: int
    node_id: str
    partitions_owned: int
    self: bool
    state: MemberState
    version: str
    def __init__(self, node_id: _Optional[str] = ..., self: bool = ..., state: _Optional[_Union[MemberState, str]] = ..., incarnation: _Optional[str] = ..., lease_left_ms: _Optional[int] = ..., grpc_address: _Optional[str] = ..., http_address: _Optional[str] = ..., version: _Optional[str] = ..., partitions_owned: _Optional[int] = ..., member_revision: _Optional[int] = ..., drained: bool = ...) -> None: ...

class ConcurrencyLimit(_message.Message):
    __slots__ = ["held", "in_flight", "max", "queue"]
    HELD_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    held: int
    in_flight: int
    max: int
    queue: str
    def __init__(self, queue: _Optional[str] = ..., max: _Optional[int] = ..., in_flight: _Optional[int] = ..., held: _Optional[int] = ...) -> None: ...

class DeleteGroupConfigRequest(_message.Message):
    __slots__ = ["group", "queue"]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    group: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class DeleteGroupConfigResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeleteQueueConcurrencyLimitRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class DeleteQueueConcurrencyLimitResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeleteQueueRateLimitRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class DeleteQueueRateLimitResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeleteQueueRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class DeleteQueueResponse(_message.Message):
    __slots__ = ["deleted_tasks"]
    DELETED_TASKS_FIELD_NUMBER: _ClassVar[int]
    deleted_tasks: int
    def __init__(self, deleted_tasks: _Optional[int] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ["name", "queue"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeleteStrategiesRequest(_message.Message):
    __slots__ = ["type"]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    type: str
    def __init__(self, type: _Optional[str] = ...) -> None: ...

class DeleteStrategiesResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeleteTaskRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteTaskResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ["node_id", "undo", "wait_ms"]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    UNDO_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    undo: bool
    wait_ms: int
    def __init__(self, node_id: _Optional[str] = ..., undo: bool = ..., wait_ms: _Optional[int] = ...) -> None: ...

class DrainNodeResponse(_message.Message):
    __slots__ = ["drained", "finished", "node_id", "partitions_left", "waited_ms"]
    DRAINED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_LEFT_FIELD_NUMBER: _ClassVar[int]
    WAITED_MS_FIELD_NUMBER: _ClassVar[int]
    drained: bool
    finished: bool
    node_id: str
    partitions_left: int
    waited_ms: int
    def __init__(self, node_id: _Optional[str] = ..., drained: bool = ..., partitions_left: _Optional[int] = ..., finished: bool = ..., waited_ms: _Optional[int] = ...) -> None: ...

class EtcdEndpointHealth(_message.Message):
    __slots__ = ["endpoint", "healthy"]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    healthy: bool
    def __init__(self, endpoint: _Optional[str] = ..., healthy: bool = ...) -> None: ...

class GetActivityRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class GetActivityResponse(_message.Message):
    __slots__ = ["bucket_ms", "buckets"]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_MS_FIELD_NUMBER: _ClassVar[int]
    bucket_ms: int
    buckets: _containers.RepeatedCompositeFieldContainer[ActivityBucket]
    def __init__(self, bucket_ms: _Optional[int] = ..., buckets: _Optional[_Iterable[_Union[ActivityBucket, _Mapping]]] = ...) -> None: ...

class GetClusterInfoRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetClusterInfoResponse(_message.Message):
    __slots__ = ["active_grains", "active_queues", "members", "node_id", "parked_leases", "ring_version", "started_at_ms"]
    ACTIVE_GRAINS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_QUEUES_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PARKED_LEASES_FIELD_NUMBER: _ClassVar[int]
    RING_VERSION_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    active_grains: int
    active_queues: _containers.RepeatedScalarFieldContainer[str]
    members: _containers.RepeatedCompositeFieldContainer[ClusterMember]
    node_id: str
    parked_leases: int
    ring_version: int
    started_at_ms: int
    def __init__(self, node_id: _Optional[str] = ..., ring_version: _Optional[int] = ..., members: _Optional[_Iterable[_Union[ClusterMember, _Mapping]]] = ..., active_grains: _Optional[int] = ..., active_queues: _Optional[_Iterable[str]] = ..., parked_leases: _Optional[int] = ..., started_at_ms: _Optional[int] = ...) -> None: ...

class GetClusterStatusRequest(_message.Message):
    __slots__ = ["with_leases", "with_log"]
    WITH_LEASES_FIELD_NUMBER: _ClassVar[int]
    WITH_LOG_FIELD_NUMBER: _ClassVar[int]
    with_leases: bool
    with_log: bool
    def __init__(self, with_leases: bool = ..., with_log: bool = ...) -> None: ...

class GetClusterStatusResponse(_message.Message):
    __slots__ = ["changelog", "cluster_name", "clustered", "drained_nodes", "etcd", "fences", "incarnation", "members", "node_id", "partition_owners", "partition_states", "partitions", "phase", "ring_version", "serving"]
    CHANGELOG_FIELD_NUMBER: _ClassVar[int]
    CLUSTERED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    DRAINED_NODES_FIELD_NUMBER: _ClassVar[int]
    ETCD_FIELD_NUMBER: _ClassVar[int]
    FENCES_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_OWNERS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_STATES_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    RING_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    changelog: ChangelogStatus
    cluster_name: str
    clustered: bool
    drained_nodes: _containers.RepeatedScalarFieldContainer[str]
    etcd: _containers.RepeatedCompositeFieldContainer[EtcdEndpointHealth]
    fences: int
    incarnation: str
    members: _containers.RepeatedCompositeFieldContainer[ClusterMemberStatus]
    node_id: str
    partition_owners: _containers.RepeatedScalarFieldContainer[str]
    partition_states: _containers.RepeatedCompositeFieldContainer[PartitionState]
    partitions: int
    phase: str
    ring_version: int
    serving: bool
    def __init__(self, clustered: bool = ..., cluster_name: _Optional[str] = ..., node_id: _Optional[str] = ..., phase: _Optional[str] = ..., incarnation: _Optional[str] = ..., serving: bool = ..., fences: _Optional[int] = ..., ring_version: _Optional[int] = ..., partitions: _Optional[int] = ..., members: _Optional[_Iterable[_Union[ClusterMemberStatus, _Mapping]]] = ..., partition_owners: _Optional[_Iterable[str]] = ..., etcd: _Optional[_Iterable[_Union[EtcdEndpointHealth, _Mapping]]] = ..., partition_states: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ..., drained_nodes: _Optional[_Iterable[str]] = ..., changelog: _Optional[_Union[ChangelogStatus, _Mapping]] = ...) -> None: ...

class GroupConfig(_message.Message):
    __slots__ = ["grace_ms", "group", "max_delay_ms", "max_size", "queue"]
    GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_SIZE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    grace_ms: int
    group: str
    max_delay_ms: int
    max_size: int
    queue: str
    def __init__(self, queue: _Optional[str] = ..., group: _Optional[str] = ..., max_size: _Optional[int] = ..., max_delay_ms: _Optional[int] = ..., grace_ms: _Optional[int] = ...) -> None: ...

class GroupInfo(_message.Message):
    __slots__ = ["config", "first_member_at_ms", "group", "last_member_at_ms", "next_fire_at_ms", "queue", "size", "state", "type", "worker_available"]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    FIRST_MEMBER_AT_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LAST_MEMBER_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKER_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    config: GroupConfig
    first_member_at_ms: int
    group: str
    last_member_at_ms: int
    next_fire_at_ms: int
    queue: str
    size: int
    state: GroupState
    type: str
    worker_available: bool
    def __init__(self, queue: _Optional[str] = ..., group: _Optional[str] = ..., type: _Optional[str] = ..., state: _Optional[_Union[GroupState, str]] = ..., size: _Optional[int] = ..., first_member_at_ms: _Optional[int] = ..., last_member_at_ms: _Optional[int] = ..., next_fire_at_ms: _Optional[int] = ..., worker_available: bool = ..., config: _Optional[_Union[GroupConfig, _Mapping]] = ...) -> None: ...

class ListConcurrencyLimitsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListConcurrencyLimitsResponse(_message.Message):
    __slots__ = ["limits"]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[ConcurrencyLimit]
    def __init__(self, limits: _Optional[_Iterable[_Union[ConcurrencyLimit, _Mapping]]] = ...) -> None: ...

class ListGroupConfigsRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ListGroupConfigsResponse(_message.Message):
    __slots__ = ["configs", "server_default"]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    SERVER_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    configs: _containers.RepeatedCompositeFieldContainer[GroupConfig]
    server_default: GroupConfig
    def __init__(self, configs: _Optional[_Iterable[_Union[GroupConfig, _Mapping]]] = ..., server_default: _Optional[_Union[GroupConfig, _Mapping]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ["groups"]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupInfo]
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupInfo, _Mapping]]] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ["queues"]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class ListRateLimitsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListRateLimitsResponse(_message.Message):
    __slots__ = ["default_limit", "limits"]
    DEFAULT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    default_limit: RateLimit
    limits: _containers.RepeatedCompositeFieldContainer[RateLimit]
    def __init__(self, limits: _Optional[_Iterable[_Union[RateLimit, _Mapping]]] = ..., default_limit: _Optional[_Union[RateLimit, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ["schedules"]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ...) -> None: ...

class ListStrategiesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListStrategiesResponse(_message.Message):
    __slots__ = ["types"]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    types: _containers.RepeatedCompositeFieldContainer[_task_pb2.TaskTypeRules]
    def __init__(self, types: _Optional[_Iterable[_Union[_task_pb2.TaskTypeRules, _Mapping]]] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "queue", "state"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    queue: str
    state: _task_pb2.TaskState
    def __init__(self, queue: _Optional[str] = ..., state: _Optional[_Union[_task_pb2.TaskState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ["next_page_token", "tasks"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    tasks: _containers.RepeatedCompositeFieldContainer[_task_pb2.Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[_task_pb2.Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ["workers"]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class MovePartitionRequest(_message.Message):
    __slots__ = ["partition", "to_node_id", "unpin", "wait_ms"]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    UNPIN_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    to_node_id: str
    unpin: bool
    wait_ms: int
    def __init__(self, partition: _Optional[int] = ..., to_node_id: _Optional[str] = ..., unpin: bool = ..., wait_ms: _Optional[int] = ...) -> None: ...

class MovePartitionResponse(_message.Message):
    __slots__ = ["finished", "from_node_id", "held_by", "partition", "pinned_to", "waited_ms"]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HELD_BY_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PINNED_TO_FIELD_NUMBER: _ClassVar[int]
    WAITED_MS_FIELD_NUMBER: _ClassVar[int]
    finished: bool
    from_node_id: str
    held_by: str
    partition: int
    pinned_to: str
    waited_ms: int
    def __init__(self, partition: _Optional[int] = ..., from_node_id: _Optional[str] = ..., held_by: _Optional[str] = ..., pinned_to: _Optional[str] = ..., finished: bool = ..., waited_ms: _Optional[int] = ...) -> None: ...

class PartitionState(_message.Message):
    __slots__ = ["epoch", "log_last_seq", "owner", "owner_down", "partition", "pinned_to", "standby_lag_entries", "standby_seq", "standbys", "state"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    OWNER_DOWN_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PINNED_TO_FIELD_NUMBER: _ClassVar[int]
    STANDBYS_FIELD_NUMBER: _ClassVar[int]
    STANDBY_LAG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    STANDBY_SEQ_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    log_last_seq: int
    owner: str
    owner_down: bool
    partition: int
    pinned_to: str
    standby_lag_entries: int
    standby_seq: int
    standbys: _containers.RepeatedScalarFieldContainer[str]
    state: str
    def __init__(self, partition: _Optional[int] = ..., owner: _Optional[str] = ..., epoch: _Optional[int] = ..., state: _Optional[str] = ..., owner_down: bool = ..., pinned_to: _Optional[str] = ..., standbys: _Optional[_Iterable[str]] = ..., log_last_seq: _Optional[int] = ..., standby_seq: _Optional[int] = ..., standby_lag_entries: _Optional[int] = ...) -> None: ...

class PauseQueueRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class PauseQueueResponse(_message.Message):
    __slots__ = ["queue", "similar_queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    SIMILAR_QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: QueueInfo
    similar_queue: str
    def __init__(self, queue: _Optional[_Union[QueueInfo, _Mapping]] = ..., similar_queue: _Optional[str] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ["name", "queue"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ["concurrency_limit", "counts", "name", "owner", "paused"]
    CONCURRENCY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    concurrency_limit: int
    counts: StateCounts
    name: str
    owner: str
    paused: bool
    def __init__(self, name: _Optional[str] = ..., paused: bool = ..., counts: _Optional[_Union[StateCounts, _Mapping]] = ..., owner: _Optional[str] = ..., concurrency_limit: _Optional[int] = ...) -> None: ...

class RateLimit(_message.Message):
    __slots__ = ["burst", "queue", "rate_per_sec"]
    BURST_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_SEC_FIELD_NUMBER: _ClassVar[int]
    burst: int
    queue: str
    rate_per_sec: float
    def __init__(self, queue: _Optional[str] = ..., rate_per_sec: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class ResumeQueueRequest(_message.Message):
    __slots__ = ["queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ResumeQueueResponse(_message.Message):
    __slots__ = ["queue", "similar_queue"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    SIMILAR_QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: QueueInfo
    similar_queue: str
    def __init__(self, queue: _Optional[_Union[QueueInfo, _Mapping]] = ..., similar_queue: _Optional[str] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ["name", "queue"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class RetryTaskRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RetryTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class RunScheduleNowRequest(_message.Message):
    __slots__ = ["name", "queue"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class RunScheduleNowResponse(_message.Message):
    __slots__ = ["task_id"]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class RunTaskRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RunTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ["created_at_ms", "cron", "interval_ms", "last_task_id", "last_task_state", "last_tick_at_ms", "missed_ticks", "name", "next_tick_at_ms", "paused", "skip_if_running", "task", "time_zone", "updated_at_ms"]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_TASK_STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_TICK_AT_MS_FIELD_NUMBER: _ClassVar[int]
    MISSED_TICKS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_TICK_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    SKIP_IF_RUNNING_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    created_at_ms: int
    cron: str
    interval_ms: int
    last_task_id: str
    last_task_state: _task_pb2.TaskState
    last_tick_at_ms: int
    missed_ticks: MissedTicks
    name: str
    next_tick_at_ms: int
    paused: bool
    skip_if_running: bool
    task: _task_pb2.TaskSpec
    time_zone: str
    updated_at_ms: int
    def __init__(self, name: _Optional[str] = ..., task: _Optional[_Union[_task_pb2.TaskSpec, _Mapping]] = ..., cron: _Optional[str] = ..., interval_ms: _Optional[int] = ..., time_zone: _Optional[str] = ..., missed_ticks: _Optional[_Union[MissedTicks, str]] = ..., skip_if_running: bool = ..., paused: bool = ..., next_tick_at_ms: _Optional[int] = ..., last_tick_at_ms: _Optional[int] = ..., last_task_id: _Optional[str] = ..., last_task_state: _Optional[_Union[_task_pb2.TaskState, str]] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ...) -> None: ...

class SetGroupConfigRequest(_message.Message):
    __slots__ = ["config"]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: GroupConfig
    def __init__(self, config: _Optional[_Union[GroupConfig, _Mapping]] = ...) -> None: ...

class SetGroupConfigResponse(_message.Message):
    __slots__ = ["config", "similar_queue"]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SIMILAR_QUEUE_FIELD_NUMBER: _ClassVar[int]
    config: GroupConfig
    similar_queue: str
    def __init__(self, config: _Optional[_Union[GroupConfig, _Mapping]] = ..., similar_queue: _Optional[str] = ...) -> None: ...

class SetQueueConcurrencyLimitRequest(_message.Message):
    __slots__ = ["max", "queue"]
    MAX_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    max: int
    queue: str
    def __init__(self, queue: _Optional[str] = ..., max: _Optional[int] = ...) -> None: ...

class SetQueueConcurrencyLimitResponse(_message.Message):
    __slots__ = ["limit", "similar_queue"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SIMILAR_QUEUE_FIELD_NUMBER: _ClassVar[int]
    limit: ConcurrencyLimit
    similar_queue: str
    def __init__(self, limit: _Optional[_Union[ConcurrencyLimit, _Mapping]] = ..., similar_queue: _Optional[str] = ...) -> None: ...

class SetQueueRateLimitRequest(_message.Message):
    __slots__ = ["burst", "queue", "rate_per_sec"]
    BURST_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_SEC_FIELD_NUMBER: _ClassVar[int]
    burst: int
    queue: str
    rate_per_sec: float
    def __init__(self, queue: _Optional[str] = ..., rate_per_sec: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class SetQueueRateLimitResponse(_message.Message):
    __slots__ = ["limit", "similar_queue"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SIMILAR_QUEUE_FIELD_NUMBER: _ClassVar[int]
    limit: RateLimit
    similar_queue: str
    def __init__(self, limit: _Optional[_Union[RateLimit, _Mapping]] = ..., similar_queue: _Optional[str] = ...) -> None: ...

class SetScheduleRequest(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class SetScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class SetStrategiesRequest(_message.Message):
    __slots__ = ["rules", "type"]
    RULES_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[_task_pb2.ConcurrencyRule]
    type: str
    def __init__(self, type: _Optional[str] = ..., rules: _Optional[_Iterable[_Union[_task_pb2.ConcurrencyRule, _Mapping]]] = ...) -> None: ...

class SetStrategiesResponse(_message.Message):
    __slots__ = ["rules"]
    RULES_FIELD_NUMBER: _ClassVar[int]
    rules: _task_pb2.TaskTypeRules
    def __init__(self, rules: _Optional[_Union[_task_pb2.TaskTypeRules, _Mapping]] = ...) -> None: ...

class StateCounts(_message.Message):
    __slots__ = ["active", "aggregating", "archived", "cancelled", "completed", "pending", "retry", "scheduled"]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    AGGREGATING_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    active: int
    aggregating: int
    archived: int
    cancelled: int
    completed: int
    pending: int
    retry: int
    scheduled: int
    def __init__(self, scheduled: _Optional[int] = ..., pending: _Optional[int] = ..., aggregating: _Optional[int] = ..., active: _Optional[int] = ..., retry: _Optional[int] = ..., completed: _Optional[int] = ..., archived: _Optional[int] = ..., cancelled: _Optional[int] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ["concurrency", "connected_since_ms", "host", "in_flight", "last_seen_at_ms", "polling", "queues", "types", "worker_id"]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_AT_MS_FIELD_NUMBER: _ClassVar[int]
    POLLING_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    concurrency: int
    connected_since_ms: int
    host: str
    in_flight: int
    last_seen_at_ms: int
    polling: bool
    queues: _containers.RepeatedScalarFieldContainer[str]
    types: _containers.RepeatedScalarFieldContainer[str]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., host: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., types: _Optional[_Iterable[str]] = ..., concurrency: _Optional[int] = ..., in_flight: _Optional[int] = ..., last_seen_at_ms: _Optional[int] = ..., connected_since_ms: _Optional[int] = ..., polling: bool = ...) -> None: ...

class GroupState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MissedTicks(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MemberState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class BulkAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
