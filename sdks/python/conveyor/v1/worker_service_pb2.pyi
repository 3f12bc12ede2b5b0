from conveyor.v1 import task_pb2 as _task_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
OUTCOME_RELEASED: Outcome
OUTCOME_RETRY: Outcome
OUTCOME_SKIP_RETRY: Outcome
OUTCOME_SUCCESS: Outcome
OUTCOME_UNSPECIFIED: Outcome

class Delivery(_message.Message):
    __slots__ = ["batch", "deadline_at_ms", "group", "lease_expires_at_ms", "lease_id", "queue", "tasks"]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    batch: bool
    deadline_at_ms: int
    group: str
    lease_expires_at_ms: int
    lease_id: str
    queue: str
    tasks: _containers.RepeatedCompositeFieldContainer[_task_pb2.Task]
    def __init__(self, lease_id: _Optional[str] = ..., queue: _Optional[str] = ..., lease_expires_at_ms: _Optional[int] = ..., deadline_at_ms: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[_task_pb2.Task, _Mapping]]] = ..., batch: bool = ..., group: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ["leases", "worker_id"]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., leases: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ["leases"]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseStatus]
    def __init__(self, leases: _Optional[_Iterable[_Union[LeaseStatus, _Mapping]]] = ...) -> None: ...

class LeaseRef(_message.Message):
    __slots__ = ["lease_id", "queue"]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    lease_id: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., lease_id: _Optional[str] = ...) -> None: ...

class LeaseRequest(_message.Message):
    __slots__ = ["batch_types", "concurrency", "host", "max_deliveries", "poll_owners", "queues", "standing", "types", "wait_ms", "worker_id"]
    BATCH_TYPES_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    POLL_OWNERS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    STANDING_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    batch_types: _containers.RepeatedScalarFieldContainer[str]
    concurrency: int
    host: str
    max_deliveries: int
    poll_owners: bool
    queues: _containers.RepeatedCompositeFieldContainer[QueueWeight]
    standing: bool
    types: _containers.RepeatedScalarFieldContainer[str]
    wait_ms: int
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[_Union[QueueWeight, _Mapping]]] = ..., max_deliveries: _Optional[int] = ..., wait_ms: _Optional[int] = ..., batch_types: _Optional[_Iterable[str]] = ..., types: _Optional[_Iterable[str]] = ..., host: _Optional[str] = ..., concurrency: _Optional[int] = ..., poll_owners: bool = ..., standing: bool = ...) -> None: ...

class LeaseResponse(_message.Message):
    __slots__ = ["deliveries", "heartbeat_interval_ms", "lease_ttl_ms", "relocated", "routes"]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    RELOCATED_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[Delivery]
    heartbeat_interval_ms: int
    lease_ttl_ms: int
    relocated: bool
    routes: _containers.RepeatedCompositeFieldContainer[QueueRoute]
    def __init__(self, deliveries: _Optional[_Iterable[_Union[Delivery, _Mapping]]] = ..., lease_ttl_ms: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., routes: _Optional[_Iterable[_Union[QueueRoute, _Mapping]]] = ..., relocated: bool = ...) -> None: ...

class LeaseStatus(_message.Message):
    __slots__ = ["cancel_reason", "cancel_requested", "held", "lease_expires_at_ms", "lease_id", "queue"]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    cancel_reason: str
    cancel_requested: bool
    held: bool
    lease_expires_at_ms: int
    lease_id: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., lease_id: _Optional[str] = ..., held: bool = ..., cancel_requested: bool = ..., cancel_reason: _Optional[str] = ..., lease_expires_at_ms: _Optional[int] = ...) -> None: ...

class QueueRoute(_message.Message):
    __slots__ = ["address", "node_id", "queue"]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    address: str
    node_id: str
    queue: str
    def __init__(self, queue: _Optional[str] = ..., node_id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class QueueWeight(_message.Message):
    __slots__ = ["queue", "weight"]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    queue: str
    weight: int
    def __init__(self, queue: _Optional[str] = ..., weight: _Optional[int] = ...) -> None: ...

class RegisterTaskTypesRequest(_message.Message):
    __slots__ = ["types", "worker_id"]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    types: _containers.RepeatedCompositeFieldContainer[TaskTypeRegistration]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., types: _Optional[_Iterable[_Union[TaskTypeRegistration, _Mapping]]] = ...) -> None: ...

class RegisterTaskTypesResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SettleRequest(_message.Message):
    __slots__ = ["settlements", "worker_draining", "worker_id"]
    SETTLEMENTS_FIELD_NUMBER: _ClassVar[int]
    WORKER_DRAINING_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    settlements: _containers.RepeatedCompositeFieldContainer[Settlement]
    worker_draining: bool
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., settlements: _Optional[_Iterable[_Union[Settlement, _Mapping]]] = ..., worker_draining: bool = ...) -> None: ...

class SettleResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SettleResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SettleResult, _Mapping]]] = ...) -> None: ...

class SettleResult(_message.Message):
    __slots__ = ["error", "task_id"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    error: _task_pb2.ItemError
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., error: _Optional[_Union[_task_pb2.ItemError, _Mapping]] = ...) -> None: ...

class Settlement(_message.Message):
    __slots__ = ["error", "lease_id", "outcome", "queue", "result", "stack", "task_id"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STACK_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    error: str
    lease_id: str
    outcome: Outcome
    queue: str
    result: bytes
    stack: str
    task_id: str
    def __init__(self, queue: _Optional[str] = ..., lease_id: _Optional[str] = ..., task_id: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., result: _Optional[bytes] = ..., error: _Optional[str] = ..., stack: _Optional[str] = ...) -> None: ...

class TaskTypeRegistration(_message.Message):
    __slots__ = ["concurrency", "type"]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    concurrency: _containers.RepeatedCompositeFieldContainer[_task_pb2.ConcurrencyRule]
    type: str
    def __init__(self, type: _Optional[str] = ..., concurrency: _Optional[_Iterable[_Union[_task_pb2.ConcurrencyRule, _Mapping]]] = ...) -> None: ...

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
