from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
LIMIT_STRATEGY_CANCEL_IN_PROGRESS: LimitStrategy
LIMIT_STRATEGY_CANCEL_NEWEST: LimitStrategy
LIMIT_STRATEGY_CANCEL_QUEUED_EXCEPT_NEWEST: LimitStrategy
LIMIT_STRATEGY_CANCEL_QUEUED_EXCEPT_OLDEST: LimitStrategy
LIMIT_STRATEGY_GROUP_ROUND_ROBIN: LimitStrategy
LIMIT_STRATEGY_UNSPECIFIED: LimitStrategy
TASK_STATE_ACTIVE: TaskState
TASK_STATE_AGGREGATING: TaskState
TASK_STATE_ARCHIVED: TaskState
TASK_STATE_CANCELLED: TaskState
TASK_STATE_COMPLETED: TaskState
TASK_STATE_PENDING: TaskState
TASK_STATE_RETRY: TaskState
TASK_STATE_SCHEDULED: TaskState
TASK_STATE_UNSPECIFIED: TaskState

class Attempt(_message.Message):
    __slots__ = ["ended_at_ms", "error", "number", "outcome", "stack", "started_at_ms", "worker_id"]
    ENDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    STACK_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ended_at_ms: int
    error: str
    number: int
    outcome: str
    stack: str
    started_at_ms: int
    worker_id: str
    def __init__(self, number: _Optional[int] = ..., started_at_ms: _Optional[int] = ..., ended_at_ms: _Optional[int] = ..., worker_id: _Optional[str] = ..., outcome: _Optional[str] = ..., error: _Optional[str] = ..., stack: _Optional[str] = ...) -> None: ...

class ConcurrencyRule(_message.Message):
    __slots__ = ["expression", "max_runs", "max_runs_expression", "name", "strategy"]
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    expression: str
    max_runs: int
    max_runs_expression: str
    name: str
    strategy: LimitStrategy
    def __init__(self, name: _Optional[str] = ..., expression: _Optional[str] = ..., max_runs: _Optional[int] = ..., max_runs_expression: _Optional[str] = ..., strategy: _Optional[_Union[LimitStrategy, str]] = ...) -> None: ...

class EnqueueResult(_message.Message):
    __slots__ = ["existed", "id", "queue", "state"]
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    existed: bool
    id: str
    queue: str
    state: TaskState
    def __init__(self, id: _Optional[str] = ..., queue: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., existed: bool = ...) -> None: ...

class ItemError(_message.Message):
    __slots__ = ["code", "details", "field", "message", "reason"]
    class DetailsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: int
    details: _containers.ScalarMap[str, str]
    field: str
    message: str
    reason: str
    def __init__(self, code: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ..., details: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ["cancel_reason", "concurrency_key", "content_type", "created_at_ms", "deadline_at_ms", "expires_at_ms", "finished_at_ms", "group", "id", "last_error", "last_failed_at_ms", "lease_expires_at_ms", "lease_id", "lease_worker_id", "leased_at_ms", "max_retry", "metadata", "payload", "priority", "queue", "ready_at_ms", "result", "retention_ms", "retried", "state", "timeout_ms", "type", "unique_key"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    READY_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    RETRIED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_KEY_FIELD_NUMBER: _ClassVar[int]
    cancel_reason: str
    concurrency_key: str
    content_type: str
    created_at_ms: int
    deadline_at_ms: int
    expires_at_ms: int
    finished_at_ms: int
    group: str
    id: str
    last_error: str
    last_failed_at_ms: int
    lease_expires_at_ms: int
    lease_id: str
    lease_worker_id: str
    leased_at_ms: int
    max_retry: int
    metadata: _containers.ScalarMap[str, str]
    payload: bytes
    priority: int
    queue: str
    ready_at_ms: int
    result: bytes
    retention_ms: int
    retried: int
    state: TaskState
    timeout_ms: int
    type: str
    unique_key: str
    def __init__(self, id: _Optional[str] = ..., queue: _Optional[str] = ..., type: _Optional[str] = ..., payload: _Optional[bytes] = ..., content_type: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., state: _Optional[_Union[TaskState, str]] = ..., priority: _Optional[int] = ..., max_retry: _Optional[int] = ..., retried: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., ready_at_ms: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., deadline_at_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., unique_key: _Optional[str] = ..., concurrency_key: _Optional[str] = ..., group: _Optional[str] = ..., last_error: _Optional[str] = ..., last_failed_at_ms: _Optional[int] = ..., finished_at_ms: _Optional[int] = ..., result: _Optional[bytes] = ..., cancel_reason: _Optional[str] = ..., lease_id: _Optional[str] = ..., lease_expires_at_ms: _Optional[int] = ..., retention_ms: _Optional[int] = ..., lease_worker_id: _Optional[str] = ..., leased_at_ms: _Optional[int] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ["backoff_base_ms", "backoff_max_ms", "concurrency_key", "content_type", "deadline_at_ms", "expires_at_ms", "expires_in_ms", "group", "max_retry", "metadata", "payload", "priority", "process_at_ms", "process_in_ms", "queue", "retention_ms", "task_id", "timeout_ms", "type", "unique_key", "unique_ttl_ms"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BACKOFF_BASE_MS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MAX_MS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PROCESS_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_IN_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_KEY_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    backoff_base_ms: int
    backoff_max_ms: int
    concurrency_key: str
    content_type: str
    deadline_at_ms: int
    expires_at_ms: int
    expires_in_ms: int
    group: str
    max_retry: int
    metadata: _containers.ScalarMap[str, str]
    payload: bytes
    priority: int
    process_at_ms: int
    process_in_ms: int
    queue: str
    retention_ms: int
    task_id: str
    timeout_ms: int
    type: str
    unique_key: str
    unique_ttl_ms: int
    def __init__(self, type: _Optional[str] = ..., payload: _Optional[bytes] = ..., content_type: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., queue: _Optional[str] = ..., priority: _Optional[int] = ..., max_retry: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., deadline_at_ms: _Optional[int] = ..., process_at_ms: _Optional[int] = ..., process_in_ms: _Optional[int] = ..., unique_key: _Optional[str] = ..., unique_ttl_ms: _Optional[int] = ..., task_id: _Optional[str] = ..., retention_ms: _Optional[int] = ..., expires_in_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., concurrency_key: _Optional[str] = ..., group: _Optional[str] = ..., backoff_base_ms: _Optional[int] = ..., backoff_max_ms: _Optional[int] = ...) -> None: ...

class TaskTypeRules(_message.Message):
    __slots__ = ["rules", "source", "type", "updated_at_ms"]
    RULES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[ConcurrencyRule]
    source: str
    type: str
    updated_at_ms: int
    def __init__(self, type: _Optional[str] = ..., rules: _Optional[_Iterable[_Union[ConcurrencyRule, _Mapping]]] = ..., source: _Optional[str] = ..., updated_at_ms: _Optional[int] = ...) -> None: ...

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LimitStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
