"""What SDK users build and read: tasks to enqueue, payload encoding, durations, and a
friendly view of a stored task (datetimes and str states instead of wire integers)."""
from __future__ import annotations

import json as _json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Optional, Union

from .v1 import task_pb2

__all__ = ["Attempt", "Duration", "NewTask", "Task", "TaskInfo", "encode_json", "to_spec", "task_from_wire", "state_name"]

#: A duration: a ``timedelta`` or a number of seconds.
Duration = Union[timedelta, int, float]
JSON_CONTENT_TYPE = "application/json"
BYTES_CONTENT_TYPE = "application/octet-stream"


def encode_json(value: Any) -> bytes:
    """JSON as JavaScript's ``JSON.stringify`` writes it (no spaces, non-ASCII kept), so a
    payload built in Python has the same bytes as the TypeScript SDK's ``json(value)``."""
    return _json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _ms(d: Optional[Duration], name: str) -> int:
    if d is None:
        return 0
    seconds = d.total_seconds() if isinstance(d, timedelta) else float(d)
    if seconds < 0:
        raise ConveyorValueError(name, "must not be negative")
    return round(seconds * 1000)


def _at(t: Optional[datetime], name: str) -> int:
    if t is None:
        return 0
    if not isinstance(t, datetime):
        raise ConveyorValueError(name, "must be a datetime")
    return round(t.timestamp() * 1000)  # a naive datetime is local time, as datetime.timestamp() reads it


class ConveyorValueError(ValueError):
    """An enqueue option the SDK cannot encode (the client raises it as INVALID_FIELD)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def _payload(payload: Any, content_type: Optional[str]) -> tuple[bytes, str]:
    if payload is None:
        return b"", content_type or BYTES_CONTENT_TYPE
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload), content_type or BYTES_CONTENT_TYPE
    return encode_json(payload), content_type or JSON_CONTENT_TYPE


@dataclass(frozen=True)
class NewTask:
    """A task to enqueue (``enqueue_batch`` / ``enqueue_tx`` take a list of these; ``enqueue``
    takes the same fields as keyword arguments).

    `payload`: ``bytes`` are sent as they are (``application/octet-stream`` unless
    `content_type` says otherwise), ``None`` as an empty payload, anything else as JSON
    (``application/json``). Durations are ``timedelta`` or seconds; instants are
    ``datetime`` (naive ones are local time)."""

    type: str
    payload: Any = None
    queue: str = ""
    priority: Optional[int] = None
    max_retry: Optional[int] = None
    timeout: Optional[Duration] = None
    deadline: Optional[datetime] = None
    process_at: Optional[datetime] = None
    process_in: Optional[Duration] = None
    unique_key: str = ""
    unique_ttl: Optional[Duration] = None
    task_id: str = ""
    retention: Optional[Duration] = None
    expires_in: Optional[Duration] = None
    expires_at: Optional[datetime] = None
    concurrency_key: str = ""
    group: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    content_type: Optional[str] = None
    backoff_base: Optional[Duration] = None
    backoff_max: Optional[Duration] = None


def to_spec(t: NewTask) -> task_pb2.TaskSpec:
    """The wire TaskSpec of a NewTask (raises ConveyorValueError for a value it cannot encode)."""
    data, content_type = _payload(t.payload, t.content_type)
    spec = task_pb2.TaskSpec(
        type=t.type, payload=data, content_type=content_type, metadata=dict(t.metadata), queue=t.queue,
        timeout_ms=_ms(t.timeout, "timeout"), deadline_at_ms=_at(t.deadline, "deadline"),
        process_at_ms=_at(t.process_at, "process_at"), process_in_ms=_ms(t.process_in, "process_in"),
        unique_key=t.unique_key, unique_ttl_ms=_ms(t.unique_ttl, "unique_ttl"), task_id=t.task_id,
        expires_in_ms=_ms(t.expires_in, "expires_in"), expires_at_ms=_at(t.expires_at, "expires_at"),
        concurrency_key=t.concurrency_key, group=t.group,
        backoff_base_ms=_ms(t.backoff_base, "backoff_base"), backoff_max_ms=_ms(t.backoff_max, "backoff_max"),
    )
    if t.priority is not None:
        spec.priority = t.priority
    if t.max_retry is not None:
        spec.max_retry = t.max_retry
    if t.retention is not None:
        spec.retention_ms = _ms(t.retention, "retention")
    return spec


def state_name(state: int) -> str:
    """A wire state's name in lowercase (``"pending"``); ``"unknown"`` for one this SDK does not know."""
    if state == task_pb2.TASK_STATE_UNSPECIFIED:
        return "unknown"
    try:
        return task_pb2.TaskState.Name(state)[len("TASK_STATE_"):].lower()
    except ValueError:
        return "unknown"


@dataclass(frozen=True)
class TaskInfo:
    """The answer to an enqueue."""

    id: str
    queue: str
    state: str
    #: True when `task_id` named an existing task: nothing new was stored.
    existed: bool


def info_from_wire(r: task_pb2.EnqueueResult) -> TaskInfo:
    return TaskInfo(id=r.id, queue=r.queue, state=state_name(r.state), existed=r.existed)


def _dt(ms: int) -> Optional[datetime]:
    return None if ms == 0 else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(frozen=True)
class Attempt:
    """One attempt of a task, as the node keeps it (the last 25 per task)."""

    #: 1 for the task's first lease, counting every lease (a released one too).
    number: int
    started_at: Optional[datetime]
    #: None while the attempt runs.
    ended_at: Optional[datetime]
    #: The worker that ran it ("" when its Lease call named none).
    worker_id: str
    #: How it ended: "succeeded", "failed", "failed_no_retry", "timed_out", "lease_expired",
    #: "released" or "cancelled"; "" while it runs.
    outcome: str
    #: The error it failed with ("" when it did not fail).
    error: str
    #: Where the error came from: the traceback (and causes) the worker sent; "" when none.
    stack: str = ""


def attempt_from_wire(a: task_pb2.Attempt) -> Attempt:
    return Attempt(number=a.number, started_at=_dt(a.started_at_ms), ended_at=_dt(a.ended_at_ms), worker_id=a.worker_id,
                   outcome=a.outcome, error=a.error, stack=a.stack)


@dataclass(frozen=True)
class Task:
    """A stored task as the SDK shows it. Instants are UTC datetimes, or None when unset."""

    id: str
    queue: str
    type: str
    payload: bytes
    content_type: str
    metadata: dict[str, str]
    state: str
    priority: int
    max_retry: int
    retried: int
    created_at: Optional[datetime]
    ready_at: Optional[datetime]
    deadline: Optional[datetime]
    expires_at: Optional[datetime]
    finished_at: Optional[datetime]
    last_failed_at: Optional[datetime]
    unique_key: str
    concurrency_key: str
    group: str
    last_error: str
    result: bytes
    cancel_reason: str
    lease_id: str
    #: The attempt history, oldest first (the last 25): filled by ``get_task``, empty in lists.
    attempts: list[Attempt] = field(default_factory=list)

    def json(self) -> Any:
        """The payload parsed as JSON."""
        return _json.loads(self.payload)

    def result_json(self) -> Any:
        """The result parsed as JSON."""
        return _json.loads(self.result)


def task_from_wire(t: task_pb2.Task, attempts: Iterable[task_pb2.Attempt] = ()) -> Task:
    return Task(
        id=t.id, queue=t.queue, type=t.type, payload=t.payload, content_type=t.content_type, metadata=dict(t.metadata),
        state=state_name(t.state), priority=t.priority, max_retry=t.max_retry, retried=t.retried,
        created_at=_dt(t.created_at_ms), ready_at=_dt(t.ready_at_ms), deadline=_dt(t.deadline_at_ms),
        expires_at=_dt(t.expires_at_ms), finished_at=_dt(t.finished_at_ms), last_failed_at=_dt(t.last_failed_at_ms),
        unique_key=t.unique_key, concurrency_key=t.concurrency_key, group=t.group, last_error=t.last_error,
        result=t.result, cancel_reason=t.cancel_reason, lease_id=t.lease_id, attempts=[attempt_from_wire(a) for a in attempts],
    )
