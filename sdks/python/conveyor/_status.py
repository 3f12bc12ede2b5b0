"""gRPC status → ConveyorError, as src/rpc/status.ts decodes it on the TypeScript side.

The node sends the code, the message, and a google.rpc.Status whose details hold an
ErrorInfo (reason; metadata: ``field`` and the error's other details) in the
``grpc-status-details-bin`` trailer. The Status and ErrorInfo classes live in a private
descriptor pool (see scripts/generate.py) so that they cannot clash with
googleapis-common-protos in the same process.
"""
from __future__ import annotations

from typing import Any, Optional

import grpc
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory

from . import _status_descriptor
from .errors import ConveyorError

DETAILS_KEY = "grpc-status-details-bin"
FIELD_KEY = "field"
_CODES = {"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED", "UNAVAILABLE",
          "UNAUTHENTICATED", "PERMISSION_DENIED", "INTERNAL"}
_TRANSPORT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
_CODE_BY_NUMBER = {c.value[0]: c.name for c in grpc.StatusCode}

_pool = descriptor_pool.DescriptorPool()
_any = descriptor_pb2.FileDescriptorProto()
any_pb2.DESCRIPTOR.CopyToProto(_any)
_pool.Add(_any)
_pool.AddSerializedFile(_status_descriptor.SERIALIZED)
_factory = message_factory.MessageFactory(_pool)
Status: Any = _factory.GetPrototype(_pool.FindMessageTypeByName("google.rpc.Status"))
ErrorInfo: Any = _factory.GetPrototype(_pool.FindMessageTypeByName("google.rpc.ErrorInfo"))
_ERROR_INFO_URL_SUFFIX = "/google.rpc.ErrorInfo"


def code_name(code: int | grpc.StatusCode) -> str:
    """The SDK's code name of a gRPC code: one of the nine conveyor uses (src/base/errors.ts's
    ErrorCode); DEADLINE_EXCEEDED and CANCELLED are UNAVAILABLE (no answer), anything else
    INTERNAL."""
    name = code.name if isinstance(code, grpc.StatusCode) else _CODE_BY_NUMBER.get(code, "INTERNAL")
    if name in _CODES:
        return name
    return "UNAVAILABLE" if name in ("DEADLINE_EXCEEDED", "CANCELLED") else "INTERNAL"


def from_rpc_error(error: grpc.RpcError) -> ConveyorError:
    """Rebuilds the ConveyorError of a failed call. A status without conveyor's ErrorInfo did
    not come from a conveyor handler: UNREACHABLE with a transport code, INTERNAL otherwise."""
    code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
    reason = "UNREACHABLE" if code in _TRANSPORT else "INTERNAL"
    field: Optional[str] = None
    details: dict[str, str] = {}
    trailers = error.trailing_metadata() or ()  # type: ignore[attr-defined]
    for key, value in trailers:
        if key != DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = Status.FromString(value)
        except Exception:  # not our trailer: keep the plain status
            continue
        for detail in status.details:
            if not detail.type_url.endswith(_ERROR_INFO_URL_SUFFIX):
                continue
            info = ErrorInfo.FromString(detail.value)
            reason = info.reason
            metadata = dict(info.metadata)
            field = metadata.pop(FIELD_KEY, None) or None
            details = metadata
    message = error.details() or str(code)  # type: ignore[attr-defined]
    return ConveyorError(code_name(code), reason, message, field, details)


def from_item_error(error: Any) -> ConveyorError:
    """A batch item's (or a settlement's) ItemError as a ConveyorError."""
    if error is None:
        return ConveyorError("INTERNAL", "INTERNAL", "unknown error")
    return ConveyorError(code_name(error.code), error.reason or "INTERNAL", error.message, error.field or None,
                         dict(error.details) or None)
