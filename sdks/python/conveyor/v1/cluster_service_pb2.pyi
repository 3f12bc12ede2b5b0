from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AcceptPartitionRequest(_message.Message):
    __slots__ = ["chunk", "data", "epoch", "from_node", "last", "log_seq", "partition", "transfer_id"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    LOG_SEQ_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_ID_FIELD_NUMBER: _ClassVar[int]
    chunk: int
    data: bytes
    epoch: int
    from_node: str
    last: bool
    log_seq: int
    partition: int
    transfer_id: str
    def __init__(self, partition: _Optional[int] = ..., from_node: _Optional[str] = ..., epoch: _Optional[int] = ..., transfer_id: _Optional[str] = ..., chunk: _Optional[int] = ..., last: bool = ..., data: _Optional[bytes] = ..., log_seq: _Optional[int] = ...) -> None: ...

class AcceptPartitionResponse(_message.Message):
    __slots__ = ["tasks"]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: int
    def __init__(self, tasks: _Optional[int] = ...) -> None: ...

class ReportSlotsRequest(_message.Message):
    __slots__ = ["from_node", "partitions", "seq", "slots"]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    from_node: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    seq: int
    slots: _containers.RepeatedCompositeFieldContainer[SharedSlotReport]
    def __init__(self, from_node: _Optional[str] = ..., seq: _Optional[int] = ..., partitions: _Optional[_Iterable[int]] = ..., slots: _Optional[_Iterable[_Union[SharedSlotReport, _Mapping]]] = ...) -> None: ...

class ReportSlotsResponse(_message.Message):
    __slots__ = ["grants", "refused_partitions"]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[SharedSlotGrant]
    refused_partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, grants: _Optional[_Iterable[_Union[SharedSlotGrant, _Mapping]]] = ..., refused_partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class SharedSlotGrant(_message.Message):
    __slots__ = ["grant", "limit", "slot"]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    grant: int
    limit: int
    slot: str
    def __init__(self, slot: _Optional[str] = ..., grant: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class SharedSlotReport(_message.Message):
    __slots__ = ["held", "inflight", "limit", "limit_set_at_ms", "slot", "want"]
    HELD_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_SET_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    WANT_FIELD_NUMBER: _ClassVar[int]
    held: int
    inflight: int
    limit: int
    limit_set_at_ms: int
    slot: str
    want: int
    def __init__(self, slot: _Optional[str] = ..., held: _Optional[int] = ..., inflight: _Optional[int] = ..., want: _Optional[int] = ..., limit: _Optional[int] = ..., limit_set_at_ms: _Optional[int] = ...) -> None: ...
