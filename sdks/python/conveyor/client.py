"""The producer client: enqueue tasks, read and cancel them.

:class:`AsyncClient` coalesces overlapping ``enqueue`` calls into EnqueueBatch calls, each
caller getting its own outcome (_coalescer.py says when and why); a lone call goes out at
once as a plain Enqueue, and ``coalesce_enqueues=False`` sends every call alone.

Every call waits for the node to be reachable up to its timeout (``wait_for_ready``), so a
producer rides out a node restart instead of failing at once; failures raise
:class:`~conveyor.errors.ConveyorError` with the server's code, reason and field.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Optional, Union

import re
import time

import grpc
import grpc.aio

from ._channel import TlsOption, aio_channel, auth_metadata, channel_credentials, sync_channel
from ._coalescer import EnqueueCoalescer
from ._status import from_item_error, from_rpc_error
from .admin import Admin, AsyncAdmin
from .errors import ConveyorError, TaskFailedError, WaitTimeoutError
from .task import ConveyorValueError, Duration, NewTask, Task, TaskInfo, info_from_wire, task_from_wire, to_spec
from .v1 import task_pb2, task_service_pb2, task_service_pb2_grpc

__all__ = ["AsyncClient", "Client"]

#: The longest one WaitTask call waits on the node (src/base/limits.ts WAIT_TASK_MAX_MS); longer waits call again.
WAIT_TASK_MAX_S = 300.0
#: How much longer than the node's wait a WaitTask call may take to be answered.
WAIT_CALL_MARGIN_S = 10.0
#: Tasks per EnqueueBatch (src/base/limits.ts BATCH_MAX).
BATCH_MAX = 1000
#: The largest request message a node accepts (src/base/limits.ts REQUEST_MAX_BYTES).
REQUEST_MAX_BYTES = 4 * 1024 * 1024
#: A batch stays this far under the node's request size limit (framing, estimates).
BATCH_MAX_BYTES = REQUEST_MAX_BYTES - 64 * 1024
#: Coalesced sends in flight before later calls wait for one to return (the TS SDK's
#: COALESCE_IN_FLIGHT_MAX, src/sdk/client.ts, which says why two and not one).
COALESCE_IN_FLIGHT_MAX = 2
#: Whole-call refusals of an EnqueueBatch made before any work (the guard: a token scoped
#: away from one item's queue, a role; the request's size and shape): they say nothing
#: about one item, so the coalescer sends each member again alone.
_REFUSED_BEFORE_WORK = frozenset({"INVALID_ARGUMENT", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED"})


def _chunks(specs: Sequence[task_pb2.TaskSpec]) -> list[list[task_pb2.TaskSpec]]:
    """Consecutive chunks of at most BATCH_MAX specs and BATCH_MAX_BYTES (a larger single
    spec goes alone: the node judges it)."""
    chunks: list[list[task_pb2.TaskSpec]] = []
    chunk: list[task_pb2.TaskSpec] = []
    size = 0
    for spec in specs:
        n = _spec_bytes(spec)
        if chunk and (len(chunk) >= BATCH_MAX or size + n > BATCH_MAX_BYTES):
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(spec)
        size += n
    if chunk:
        chunks.append(chunk)
    return chunks


def _spec_bytes(spec: task_pb2.TaskSpec) -> int:
    """A spec's size in a batch request (its bytes, and room for the field's framing)."""
    return spec.ByteSize() + 16


def _refused_before_work(error: BaseException) -> bool:
    return isinstance(error, ConveyorError) and error.code in _REFUSED_BEFORE_WORK


def _spec(task: NewTask) -> task_pb2.TaskSpec:
    try:
        return to_spec(task)
    except ConveyorValueError as e:
        raise ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", str(e), f"task.{e.field}") from None
    except (TypeError, ValueError) as e:
        raise ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", f"task: {e}", "task") from None


def _wait_seconds(timeout: Optional[Duration]) -> float:
    """A wait_for_result timeout in seconds (inf for None), refused unless positive."""
    if timeout is None:
        return float("inf")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if not seconds > 0:
        raise ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", f"wait_for_result: timeout must be positive (got {timeout!r})",
                            "timeout")
    return seconds


def _wait_request(id: str, give_up_at: float) -> tuple[task_service_pb2.WaitTaskRequest, float]:
    """One WaitTask call's request and its deadline: at most WAIT_TASK_MAX_S of the time left."""
    wait = max(0.001, min(WAIT_TASK_MAX_S, give_up_at - time.monotonic()))
    return task_service_pb2.WaitTaskRequest(id=id, timeout_ms=max(1, round(wait * 1000))), wait + WAIT_CALL_MARGIN_S


def _waited(res: task_service_pb2.WaitTaskResponse, id: str, timeout: float, give_up_at: float) -> Optional[Task]:
    """The completed task, None to call again; raises when it failed or the wait is over."""
    task = task_from_wire(res.task)
    if res.finished:
        if task.state != "completed":
            raise TaskFailedError(task)
        return task
    if time.monotonic() >= give_up_at:
        raise WaitTimeoutError(id, timeout, task.state)
    return None


class Client:
    """A producer. ``Client()`` dials $CONVEYOR_SERVER or 127.0.0.1:7233; `timeout` is each
    call's deadline (``timedelta`` or seconds, default 30 s); `token` is sent as
    ``authorization: Bearer`` to a node with an auth file (default $CONVEYOR_TOKEN); `tls`
    connects with TLS: ``True`` trusts the system's roots, a :class:`~conveyor.Tls` names
    the CA and, for mTLS, the client's certificate and key. Use it
    as a context manager or call :meth:`close`. Safe to share between threads. One RPC per
    :meth:`enqueue` (a blocking call has no overlap to coalesce; see :class:`AsyncClient`)."""

    def __init__(self, address: Optional[str] = None, *, timeout: Duration = 30.0, token: Optional[str] = None,
                 tls: TlsOption = None) -> None:
        self._metadata = auth_metadata(token)
        self._channel = sync_channel(address, channel_credentials(tls))
        self._stub = task_service_pb2_grpc.TaskServiceStub(self._channel)
        self._timeout = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        self._admin: Optional[Admin] = None

    @property
    def admin(self) -> Admin:
        """The admin/inspector API over this client's channel."""
        if self._admin is None:
            self._admin = Admin(timeout=self._timeout, _channel=self._channel, _metadata=self._metadata)
        return self._admin

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=self._timeout, wait_for_ready=True, metadata=self._metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def enqueue(
        self,
        type: str,
        payload: Any = None,
        *,
        queue: str = "",
        priority: Optional[int] = None,
        max_retry: Optional[int] = None,
        timeout: Optional[Duration] = None,
        deadline: Optional[datetime] = None,
        process_at: Optional[datetime] = None,
        process_in: Optional[Duration] = None,
        unique_key: str = "",
        unique_ttl: Optional[Duration] = None,
        task_id: str = "",
        retention: Optional[Duration] = None,
        expires_in: Optional[Duration] = None,
        expires_at: Optional[datetime] = None,
        concurrency_key: str = "",
        group: str = "",
        metadata: Optional[Mapping[str, str]] = None,
        content_type: Optional[str] = None,
        backoff_base: Optional[Duration] = None,
        backoff_max: Optional[Duration] = None,
    ) -> TaskInfo:
        """Enqueues one task; returns once it is durably stored. `payload`: ``bytes`` as they
        are, ``None`` empty, anything else as JSON. See :class:`~conveyor.task.NewTask`."""
        task = NewTask(
            type=type, payload=payload, queue=queue, priority=priority, max_retry=max_retry, timeout=timeout,
            deadline=deadline, process_at=process_at, process_in=process_in, unique_key=unique_key,
            unique_ttl=unique_ttl, task_id=task_id, retention=retention, expires_in=expires_in, expires_at=expires_at,
            concurrency_key=concurrency_key, group=group, metadata=dict(metadata or {}), content_type=content_type,
            backoff_base=backoff_base, backoff_max=backoff_max,
        )
        res = self._call(self._stub.Enqueue, task_service_pb2.EnqueueRequest(task=_spec(task)))
        return info_from_wire(res.result)

    def enqueue_task(self, task: NewTask) -> TaskInfo:
        """Enqueues one prepared :class:`~conveyor.task.NewTask`."""
        res = self._call(self._stub.Enqueue, task_service_pb2.EnqueueRequest(task=_spec(task)))
        return info_from_wire(res.result)

    def enqueue_batch(self, tasks: Iterable[NewTask]) -> list[Union[TaskInfo, ConveyorError]]:
        """Enqueues many tasks (in calls of up to 1000); each item succeeds or fails on its
        own: the list holds a TaskInfo or a ConveyorError per task, in order."""
        out: list[Union[TaskInfo, ConveyorError]] = []
        for chunk in _chunks([_spec(t) for t in tasks]):
            res = self._call(self._stub.EnqueueBatch, task_service_pb2.EnqueueBatchRequest(tasks=chunk))
            for item in res.items:
                out.append(info_from_wire(item.result) if item.WhichOneof("outcome") == "result" else from_item_error(item.error))
        return out

    def enqueue_tx(self, tasks: Iterable[NewTask]) -> list[TaskInfo]:
        """Enqueues up to 1000 tasks of one queue all-or-nothing (any invalid task fails the call)."""
        res = self._call(self._stub.EnqueueTx, task_service_pb2.EnqueueTxRequest(tasks=[_spec(t) for t in tasks]))
        return [info_from_wire(r) for r in res.results]

    def get_task(self, id: str) -> Task:
        """The task with its attempt history (oldest first, the last 25)."""
        res = self._call(self._stub.GetTask, task_service_pb2.GetTaskRequest(id=id))
        return task_from_wire(res.task, res.attempts)

    def wait_for_result(self, id: str, timeout: Optional[Duration] = None) -> Task:
        """Waits for a task to finish without polling (the node answers when it ends) and
        returns it completed (its ``result`` / ``result_json()``). Raises TaskFailedError when
        it is archived or cancelled, WaitTimeoutError when `timeout` (``timedelta`` or
        seconds; default: no limit) passes first, ConveyorError NOT_FOUND for an unknown or
        deleted task. A finished task answers at once."""
        seconds = _wait_seconds(timeout)
        give_up_at = time.monotonic() + seconds
        while True:
            request, deadline = _wait_request(id, give_up_at)
            try:
                res = self._stub.WaitTask(request, timeout=deadline, wait_for_ready=True, metadata=self._metadata)
            except grpc.RpcError as e:
                raise from_rpc_error(e) from None
            task = _waited(res, id, seconds, give_up_at)
            if task is not None:
                return task

    def cancel_task(self, id: str) -> Task:
        """Cancels a task that has not finished; a running task's handler is told through its
        worker's next heartbeat."""
        res = self._call(self._stub.CancelTask, task_service_pb2.CancelTaskRequest(id=id))
        return task_from_wire(res.task)


_TASKS_PREFIX = re.compile(r"^tasks\[\d+\]")


class AsyncClient:
    """The producer client for asyncio code (e.g. an ``async def`` handler enqueueing
    follow-up tasks). Overlapping :meth:`enqueue` calls are coalesced into EnqueueBatch
    calls, as in the TypeScript SDK: the calls of one event-loop iteration go out together
    while fewer than two sends are in flight, later ones wait for a send to return (a
    pending batch of BATCH_MAX tasks or about the request size goes at once); a lone call
    goes out as a plain Enqueue. Each caller gets the outcome a single Enqueue gives it.
    ``coalesce_enqueues=False`` sends one Enqueue per call. `timeout`, `token` and `tls` as
    for :class:`Client`. Create and use it on one event loop; ``async with`` or :meth:`close`."""

    def __init__(self, address: Optional[str] = None, *, timeout: Duration = 30.0, token: Optional[str] = None,
                 tls: TlsOption = None, coalesce_enqueues: bool = True) -> None:
        self._address = address
        self._credentials = channel_credentials(tls)
        self._timeout = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        self._metadata = auth_metadata(token)
        self._channel: Optional[grpc.aio.Channel] = None
        self._stub_: Any = None
        self._admin: Optional[AsyncAdmin] = None
        self._coalescer: Optional[EnqueueCoalescer[task_pb2.TaskSpec, TaskInfo]] = None
        if coalesce_enqueues:
            self._coalescer = EnqueueCoalescer(
                self._enqueue_one, self._enqueue_coalesced, _refused_before_work,
                count_max=BATCH_MAX, bytes_max=BATCH_MAX_BYTES, bytes_of=_spec_bytes, in_flight_max=COALESCE_IN_FLIGHT_MAX)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def _stub(self) -> Any:
        if self._stub_ is None:  # created on the running loop, which grpc.aio binds to
            self._channel = aio_channel(self._address, self._credentials)
            self._stub_ = task_service_pb2_grpc.TaskServiceStub(self._channel)
        return self._stub_

    @property
    def admin(self) -> AsyncAdmin:
        """The admin/inspector API over this client's channel (use it on the client's loop)."""
        if self._admin is None:
            self._stub  # opens the channel on the running loop
            self._admin = AsyncAdmin(timeout=self._timeout, _channel=self._channel, _metadata=self._metadata)
        return self._admin

    async def close(self) -> None:
        """Waits for the enqueues in progress to be answered, then closes the channel."""
        if self._coalescer is not None:
            await self._coalescer.drain()
        if self._channel is not None:
            await self._channel.close()

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            return await method(request, timeout=self._timeout, wait_for_ready=True, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None

    async def enqueue(self, type: str, payload: Any = None, **options: Any) -> TaskInfo:
        """Enqueues one task; returns once it is durably stored. Takes the same keyword
        options as :meth:`Client.enqueue` (the fields of :class:`~conveyor.task.NewTask`)."""
        return await self.enqueue_task(NewTask(type, payload, **options))

    async def enqueue_task(self, task: NewTask) -> TaskInfo:
        """Enqueues one prepared :class:`~conveyor.task.NewTask` (coalesced like :meth:`enqueue`)."""
        spec = _spec(task)
        if self._coalescer is None:
            return await self._enqueue_one(spec)
        return await self._coalescer.add(spec)

    async def _enqueue_one(self, spec: task_pb2.TaskSpec) -> TaskInfo:
        res = await self._call(self._stub.Enqueue, task_service_pb2.EnqueueRequest(task=spec))
        return info_from_wire(res.result)

    async def _enqueue_coalesced(self, specs: Sequence[task_pb2.TaskSpec]) -> list[Union[TaskInfo, ConveyorError]]:
        """Coalesced calls as one EnqueueBatch: each item's outcome, as a single Enqueue
        would have given it."""
        batch = await self._call(self._stub.EnqueueBatch, task_service_pb2.EnqueueBatchRequest(tasks=specs))
        results: list[Union[TaskInfo, ConveyorError]] = []
        for item in batch.items:
            if item.WhichOneof("outcome") == "result":
                results.append(info_from_wire(item.result))
            else:
                # The batch names items as tasks[i]; a coalesced caller sent one task, so say "task".
                e = from_item_error(item.error)
                results.append(ConveyorError(e.code, e.reason, _TASKS_PREFIX.sub("task", e.message),
                                             _TASKS_PREFIX.sub("task", e.field) if e.field else None, e.details))
        return results

    async def enqueue_batch(self, tasks: Iterable[NewTask]) -> list[Union[TaskInfo, ConveyorError]]:
        """As :meth:`Client.enqueue_batch`."""
        out: list[Union[TaskInfo, ConveyorError]] = []
        for chunk in _chunks([_spec(t) for t in tasks]):
            res = await self._call(self._stub.EnqueueBatch, task_service_pb2.EnqueueBatchRequest(tasks=chunk))
            for item in res.items:
                out.append(info_from_wire(item.result) if item.WhichOneof("outcome") == "result" else from_item_error(item.error))
        return out

    async def enqueue_tx(self, tasks: Iterable[NewTask]) -> list[TaskInfo]:
        """As :meth:`Client.enqueue_tx`."""
        res = await self._call(self._stub.EnqueueTx, task_service_pb2.EnqueueTxRequest(tasks=[_spec(t) for t in tasks]))
        return [info_from_wire(r) for r in res.results]

    async def get_task(self, id: str) -> Task:
        """As :meth:`Client.get_task` (with the attempt history)."""
        res = await self._call(self._stub.GetTask, task_service_pb2.GetTaskRequest(id=id))
        return task_from_wire(res.task, res.attempts)

    async def wait_for_result(self, id: str, timeout: Optional[Duration] = None) -> Task:
        """As :meth:`Client.wait_for_result`."""
        seconds = _wait_seconds(timeout)
        give_up_at = time.monotonic() + seconds
        while True:
            request, deadline = _wait_request(id, give_up_at)
            try:
                res = await self._stub.WaitTask(request, timeout=deadline, wait_for_ready=True, metadata=self._metadata)
            except grpc.aio.AioRpcError as e:
                raise from_rpc_error(e) from None
            task = _waited(res, id, seconds, give_up_at)
            if task is not None:
                return task

    async def cancel_task(self, id: str) -> Task:
        res = await self._call(self._stub.CancelTask, task_service_pb2.CancelTaskRequest(id=id))
        return task_from_wire(res.task)
