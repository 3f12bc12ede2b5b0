from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class AcceptPartitionRequest(_message.Message):
    __slots__ = ["chunk", "data", "epoch", "from_node", "last", "partition", "transfer_id"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_ID_FIELD_NUMBER: _ClassVar[int]
    chunk: int
    data: bytes
    epoch: int
    from_node: str
    last: bool
    partition: int
    transfer_id: str
    def __init__(self, partition: _Optional[int] = ..., from_node: _Optional[str] = ..., epoch: _Optional[int] = ..., transfer_id: _Optional[str] = ..., chunk: _Optional[int] = ..., last: bool = ..., data: _Optional[bytes] = ...) -> None: ...

class AcceptPartitionResponse(_message.Message):
    __slots__ = ["tasks"]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: int
    def __init__(self, tasks: _Optional[int] = ...) -> None: ...
