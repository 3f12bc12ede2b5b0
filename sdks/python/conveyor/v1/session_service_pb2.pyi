from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SessionRequest(_message.Message):
    __slots__ = ["call_id", "cancel", "credits", "method", "request", "timeout_ms"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    cancel: bool
    credits: int
    method: str
    request: bytes
    timeout_ms: int
    def __init__(self, call_id: _Optional[int] = ..., method: _Optional[str] = ..., request: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ..., cancel: bool = ..., credits: _Optional[int] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ["call_id", "error", "more", "response"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    error: bytes
    more: bool
    response: bytes
    def __init__(self, call_id: _Optional[int] = ..., response: _Optional[bytes] = ..., error: _Optional[bytes] = ..., more: bool = ...) -> None: ...
