from conveyor.v1 import task_pb2 as _task_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CancelTaskRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CancelTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class EnqueueBatchItem(_message.Message):
    __slots__ = ["error", "result"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    error: _task_pb2.ItemError
    result: _task_pb2.EnqueueResult
    def __init__(self, result: _Optional[_Union[_task_pb2.EnqueueResult, _Mapping]] = ..., error: _Optional[_Union[_task_pb2.ItemError, _Mapping]] = ...) -> None: ...

class EnqueueBatchRequest(_message.Message):
    __slots__ = ["tasks"]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[_task_pb2.TaskSpec]
    def __init__(self, tasks: _Optional[_Iterable[_Union[_task_pb2.TaskSpec, _Mapping]]] = ...) -> None: ...

class EnqueueBatchResponse(_message.Message):
    __slots__ = ["items"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[EnqueueBatchItem]
    def __init__(self, items: _Optional[_Iterable[_Union[EnqueueBatchItem, _Mapping]]] = ...) -> None: ...

class EnqueueRequest(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.TaskSpec
    def __init__(self, task: _Optional[_Union[_task_pb2.TaskSpec, _Mapping]] = ...) -> None: ...

class EnqueueResponse(_message.Message):
    __slots__ = ["result"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _task_pb2.EnqueueResult
    def __init__(self, result: _Optional[_Union[_task_pb2.EnqueueResult, _Mapping]] = ...) -> None: ...

class EnqueueTxRequest(_message.Message):
    __slots__ = ["tasks"]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[_task_pb2.TaskSpec]
    def __init__(self, tasks: _Optional[_Iterable[_Union[_task_pb2.TaskSpec, _Mapping]]] = ...) -> None: ...

class EnqueueTxResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_task_pb2.EnqueueResult]
    def __init__(self, results: _Optional[_Iterable[_Union[_task_pb2.EnqueueResult, _Mapping]]] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ["attempts", "task"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[_task_pb2.Attempt]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[_task_pb2.Attempt, _Mapping]]] = ...) -> None: ...

class WaitTaskRequest(_message.Message):
    __slots__ = ["id", "timeout_ms"]
    ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    timeout_ms: int
    def __init__(self, id: _Optional[str] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class WaitTaskResponse(_message.Message):
    __slots__ = ["finished", "task"]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    finished: bool
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ..., finished: bool = ...) -> None: ...
