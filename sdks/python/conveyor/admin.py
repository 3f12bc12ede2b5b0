"""The admin/inspector API: every AdminService call with typed answers (dataclasses of
admin_views.py: ``datetime`` instants, ``timedelta`` durations, state names). Every call is
one RPC; nothing is cached; a refusal raises :class:`~conveyor.errors.ConveyorError`.

:class:`Admin` blocks; :class:`AsyncAdmin` is the same on asyncio (grpc.aio). Both are
also reachable as ``client.admin`` (the client's channel). The calls themselves are
written once, in _admin_calls.py."""
from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from typing import Any, Optional, TypeVar

import grpc
import grpc.aio

from . import admin_views as v
from ._admin_calls import SCHEDULE_TASK_OPTIONS, Call, Calls
from ._channel import TlsOption, aio_channel, auth_metadata, channel_credentials, sync_channel
from ._status import from_rpc_error
from .errors import ConveyorError
from .mux import ConcurrencyRule
from .task import Duration, Task
from .v1 import admin_service_pb2_grpc

__all__ = ["Admin", "AsyncAdmin"]

T = TypeVar("T")


def _seconds(timeout: Duration) -> float:
    return timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)


def _task_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - SCHEDULE_TASK_OPTIONS)
    if unknown:
        raise ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD",
                            f"set_schedule: a schedule's task cannot take {', '.join(unknown)} (it may take {', '.join(sorted(SCHEDULE_TASK_OPTIONS))})",
                            f"task.{unknown[0]}")
    return options


class Admin:
    """Operators' calls, blocking. ``Admin()`` dials $CONVEYOR_SERVER or 127.0.0.1:7233;
    `timeout` (``timedelta`` or seconds, default 30 s), `token` and `tls` as for
    :class:`~conveyor.Client`. Use it as a context manager or call :meth:`close` (a no-op
    for ``client.admin``: the client owns the channel)."""

    def __init__(self, address: Optional[str] = None, *, timeout: Duration = 30.0, token: Optional[str] = None,
                 tls: TlsOption = None, _channel: Optional[grpc.Channel] = None,
                 _metadata: Optional[tuple[tuple[str, str], ...]] = None) -> None:
        self._owns_channel = _channel is None
        self._channel = _channel if _channel is not None else sync_channel(address, channel_credentials(tls))
        self._metadata = _metadata if _channel is not None else auth_metadata(token)
        self._stub = admin_service_pb2_grpc.AdminServiceStub(self._channel)
        self._timeout = _seconds(timeout)

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_channel:
            self._channel.close()

    def _run(self, call: Call[T]) -> T:
        try:
            res = getattr(self._stub, call.method)(call.request, timeout=self._timeout + call.extra_timeout,
                                                   wait_for_ready=True, metadata=self._metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        return call.read(res)

    # ---- queues ------------------------------------------------------------------------
    def list_queues(self) -> list[v.QueueInfo]:
        return self._run(Calls.list_queues())

    def get_queue(self, queue: str) -> Optional[v.QueueInfo]:
        """One queue's info; None when the node knows no such queue."""
        return next((q for q in self.list_queues() if q.name == queue), None)

    def pause_queue(self, queue: str) -> v.QueueInfo:
        return self._run(Calls.pause_queue(queue))

    def resume_queue(self, queue: str) -> v.QueueInfo:
        return self._run(Calls.resume_queue(queue))

    def delete_queue(self, queue: str) -> int:
        """Removes a queue that holds no unfinished task, with its finished tasks and settings;
        returns how many finished tasks went with it. NOT_FOUND (QUEUE_NOT_FOUND) for an
        unknown queue, FAILED_PRECONDITION (QUEUE_HAS_UNFINISHED_TASKS) while tasks remain."""
        return self._run(Calls.delete_queue(queue))

    # ---- tasks -------------------------------------------------------------------------
    def list_tasks(self, queue: str, state: Optional[str] = None, page_size: int = 0,
                   page_token: Optional[str] = None) -> v.TaskPage:
        """One page of a queue's tasks (optionally of one state; `page_size` 1..1000, 0 = 50)."""
        return self._run(Calls.list_tasks(queue, state, page_size, page_token))

    def tasks(self, queue: str, state: Optional[str] = None, page_size: int = 0) -> Iterator[Task]:
        """Every task of a queue (optionally of one state), page by page."""
        token: Optional[str] = None
        while True:
            page = self.list_tasks(queue, state, page_size, token)
            yield from page.tasks
            if page.next_page_token is None:
                return
            token = page.next_page_token

    def get_task(self, id: str) -> Task:
        """The task with its attempt history (oldest first, the last 25)."""
        return self._run(Calls.get_task(id))

    def cancel_task(self, id: str) -> Task:
        return self._run(Calls.cancel_task(id))

    def run_task(self, id: str) -> Task:
        """Runs a scheduled or retrying task now."""
        return self._run(Calls.run_task(id))

    def archive_task(self, id: str) -> Task:
        return self._run(Calls.archive_task(id))

    def retry_task(self, id: str) -> Task:
        """Runs an archived or cancelled task again, with a fresh set of retries."""
        return self._run(Calls.retry_task(id))

    def delete_task(self, id: str) -> None:
        return self._run(Calls.delete_task(id))

    def bulk_task_action(self, queue: str, action: str, state: str) -> int:
        """One action ("retry", "archive", "delete", "cancel") on every task of `queue` in
        `state`, run by the node in batches; returns how many tasks changed. The pairs
        mirror the single-task actions; another pair is INVALID_ARGUMENT."""
        return self._run(Calls.bulk_task_action(queue, action, state))

    def retry_all(self, queue: str, state: str = "archived") -> int:
        return self.bulk_task_action(queue, "retry", state)

    def archive_all(self, queue: str, state: str) -> int:
        return self.bulk_task_action(queue, "archive", state)

    def delete_all(self, queue: str, state: str) -> int:
        return self.bulk_task_action(queue, "delete", state)

    def cancel_all(self, queue: str, state: str) -> int:
        return self.bulk_task_action(queue, "cancel", state)

    # ---- limits ------------------------------------------------------------------------
    def set_concurrency_limit(self, queue: str, max: int) -> v.ConcurrencyLimit:
        return self._run(Calls.set_concurrency_limit(queue, max))

    def delete_concurrency_limit(self, queue: str) -> None:
        return self._run(Calls.delete_concurrency_limit(queue))

    def list_concurrency_limits(self) -> list[v.ConcurrencyLimit]:
        return self._run(Calls.list_concurrency_limits())

    def set_rate_limit(self, queue: str, rate_per_sec: float, burst: int = 0) -> v.RateLimit:
        return self._run(Calls.set_rate_limit(queue, rate_per_sec, burst))

    def delete_rate_limit(self, queue: str) -> None:
        return self._run(Calls.delete_rate_limit(queue))

    def list_rate_limits(self) -> tuple[list[v.RateLimit], Optional[v.RateLimit]]:
        """The queues' rate limits, and the node's default (None when there is none)."""
        return self._run(Calls.list_rate_limits())

    # ---- groups ------------------------------------------------------------------------
    def set_group_config(self, queue: str, group: str = "", *, max_size: Optional[int] = None,
                         max_delay: Optional[Duration] = None, grace: Optional[Duration] = None) -> v.GroupConfig:
        """A group's thresholds (group "" = the queue-wide default); unset ones keep the defaults."""
        return self._run(Calls.set_group_config(queue, group, max_size, max_delay, grace))

    def delete_group_config(self, queue: str, group: str = "") -> None:
        return self._run(Calls.delete_group_config(queue, group))

    def list_group_configs(self, queue: str = "") -> tuple[list[v.GroupConfig], Optional[v.GroupConfig]]:
        """The group configs (of one queue, or all), and the node's defaults."""
        return self._run(Calls.list_group_configs(queue))

    def list_groups(self, queue: str = "") -> list[v.GroupInfo]:
        return self._run(Calls.list_groups(queue))

    # ---- strategies --------------------------------------------------------------------
    def list_strategies(self) -> list[v.TaskTypeRules]:
        return self._run(Calls.list_strategies())

    def set_strategies(self, type: str, rules: Sequence[ConcurrencyRule]) -> v.TaskTypeRules:
        """Replaces a task type's concurrency rules (as an operator)."""
        return self._run(Calls.set_strategies(type, rules))

    def delete_strategies(self, type: str) -> None:
        return self._run(Calls.delete_strategies(type))

    # ---- node and cluster --------------------------------------------------------------
    def cluster_info(self) -> v.ClusterInfo:
        return self._run(Calls.cluster_info())

    def cluster_status(self, *, with_leases: bool = False, with_log: bool = False) -> v.ClusterStatus:
        """Membership and every partition's owner as the answering node sees it (a ring of one on a single node)."""
        return self._run(Calls.cluster_status(with_leases, with_log))

    def drain_node(self, node_id: str, *, undo: bool = False, wait: Optional[Duration] = None) -> v.DrainResult:
        """Drains a member (kept in etcd until undone); with `wait` (at most 10 min) answers
        once it holds nothing or the wait is over (`finished` says which).
        FAILED_PRECONDITION (NOT_A_CLUSTER) on a single node."""
        return self._run(Calls.drain_node(node_id, undo, wait))

    def move_partition(self, partition: int, *, to: Optional[str] = None, unpin: bool = False,
                       wait: Optional[Duration] = None) -> v.MoveResult:
        """Pins a partition to member `to` (kept in etcd), or ``unpin=True`` lets the ring place it again."""
        return self._run(Calls.move_partition(partition, to, unpin, wait))

    def list_workers(self) -> list[v.WorkerInfo]:
        return self._run(Calls.list_workers())

    def activity(self, queue: str = "") -> v.Activity:
        """Per-minute counts of the last hour on the answering node (memory only)."""
        return self._run(Calls.activity(queue))

    # ---- schedules ---------------------------------------------------------------------
    def set_schedule(self, name: str, type: str, payload: Any = None, *, queue: str = "", cron: Optional[str] = None,
                     time_zone: str = "", every: Optional[Duration] = None, missed_ticks: str = "latest",
                     skip_if_running: bool = False, **task_options: Any) -> v.Schedule:
        """Creates or replaces the schedule `name` of `queue`: a cron expression (in
        `time_zone`, default UTC) or a fixed interval `every` (at least 1 s). `task_options`:
        priority, max_retry, timeout, process_in, retention, expires_in, concurrency_key,
        group, metadata, content_type, backoff_base, backoff_max."""
        return self._run(Calls.set_schedule(name, type, payload, queue, cron, time_zone, every, missed_ticks,
                                            skip_if_running, _task_options(task_options)))

    def list_schedules(self, queue: str = "") -> list[v.Schedule]:
        return self._run(Calls.list_schedules(queue))

    def delete_schedule(self, name: str, queue: str = "") -> None:
        return self._run(Calls.delete_schedule(name, queue))

    def pause_schedule(self, name: str, queue: str = "") -> v.Schedule:
        return self._run(Calls.pause_schedule(name, queue))

    def resume_schedule(self, name: str, queue: str = "") -> v.Schedule:
        return self._run(Calls.resume_schedule(name, queue))

    def run_schedule_now(self, name: str, queue: str = "") -> str:
        """Enqueues the schedule's task now; returns the new task's id."""
        return self._run(Calls.run_schedule_now(name, queue))


class AsyncAdmin:
    """:class:`Admin` on asyncio: the same calls, ``await``-ed. Create and use it on one
    event loop; ``async with`` or :meth:`close`."""

    def __init__(self, address: Optional[str] = None, *, timeout: Duration = 30.0, token: Optional[str] = None,
                 tls: TlsOption = None, _channel: Optional[grpc.aio.Channel] = None,
                 _metadata: Optional[tuple[tuple[str, str], ...]] = None) -> None:
        self._owns_channel = _channel is None
        self._address = address
        self._credentials = channel_credentials(tls) if _channel is None else None
        self._channel = _channel
        self._metadata = _metadata if _channel is not None else auth_metadata(token)
        self._stub_: Any = None
        self._timeout = _seconds(timeout)

    async def __aenter__(self) -> "AsyncAdmin":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_channel and self._channel is not None:
            await self._channel.close()

    @property
    def _stub(self) -> Any:
        if self._stub_ is None:  # created on the running loop, which grpc.aio binds to
            if self._channel is None:
                self._channel = aio_channel(self._address, self._credentials)
            self._stub_ = admin_service_pb2_grpc.AdminServiceStub(self._channel)
        return self._stub_

    async def _run(self, call: Call[T]) -> T:
        try:
            res = await getattr(self._stub, call.method)(call.request, timeout=self._timeout + call.extra_timeout,
                                                         wait_for_ready=True, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None
        return call.read(res)

    async def list_queues(self) -> list[v.QueueInfo]:
        return await self._run(Calls.list_queues())

    async def get_queue(self, queue: str) -> Optional[v.QueueInfo]:
        return next((q for q in await self.list_queues() if q.name == queue), None)

    async def pause_queue(self, queue: str) -> v.QueueInfo:
        return await self._run(Calls.pause_queue(queue))

    async def resume_queue(self, queue: str) -> v.QueueInfo:
        return await self._run(Calls.resume_queue(queue))

    async def delete_queue(self, queue: str) -> int:
        return await self._run(Calls.delete_queue(queue))

    async def list_tasks(self, queue: str, state: Optional[str] = None, page_size: int = 0,
                         page_token: Optional[str] = None) -> v.TaskPage:
        return await self._run(Calls.list_tasks(queue, state, page_size, page_token))

    async def tasks(self, queue: str, state: Optional[str] = None, page_size: int = 0) -> AsyncIterator[Task]:
        token: Optional[str] = None
        while True:
            page = await self.list_tasks(queue, state, page_size, token)
            for t in page.tasks:
                yield t
            if page.next_page_token is None:
                return
            token = page.next_page_token

    async def get_task(self, id: str) -> Task:
        return await self._run(Calls.get_task(id))

    async def cancel_task(self, id: str) -> Task:
        return await self._run(Calls.cancel_task(id))

    async def run_task(self, id: str) -> Task:
        return await self._run(Calls.run_task(id))

    async def archive_task(self, id: str) -> Task:
        return await self._run(Calls.archive_task(id))

    async def retry_task(self, id: str) -> Task:
        return await self._run(Calls.retry_task(id))

    async def delete_task(self, id: str) -> None:
        return await self._run(Calls.delete_task(id))

    async def bulk_task_action(self, queue: str, action: str, state: str) -> int:
        return await self._run(Calls.bulk_task_action(queue, action, state))

    async def retry_all(self, queue: str, state: str = "archived") -> int:
        return await self.bulk_task_action(queue, "retry", state)

    async def archive_all(self, queue: str, state: str) -> int:
        return await self.bulk_task_action(queue, "archive", state)

    async def delete_all(self, queue: str, state: str) -> int:
        return await self.bulk_task_action(queue, "delete", state)

    async def cancel_all(self, queue: str, state: str) -> int:
        return await self.bulk_task_action(queue, "cancel", state)

    async def set_concurrency_limit(self, queue: str, max: int) -> v.ConcurrencyLimit:
        return await self._run(Calls.set_concurrency_limit(queue, max))

    async def delete_concurrency_limit(self, queue: str) -> None:
        return await self._run(Calls.delete_concurrency_limit(queue))

    async def list_concurrency_limits(self) -> list[v.ConcurrencyLimit]:
        return await self._run(Calls.list_concurrency_limits())

    async def set_rate_limit(self, queue: str, rate_per_sec: float, burst: int = 0) -> v.RateLimit:
        return await self._run(Calls.set_rate_limit(queue, rate_per_sec, burst))

    async def delete_rate_limit(self, queue: str) -> None:
        return await self._run(Calls.delete_rate_limit(queue))

    async def list_rate_limits(self) -> tuple[list[v.RateLimit], Optional[v.RateLimit]]:
        return await self._run(Calls.list_rate_limits())

    async def set_group_config(self, queue: str, group: str = "", *, max_size: Optional[int] = None,
                               max_delay: Optional[Duration] = None, grace: Optional[Duration] = None) -> v.GroupConfig:
        return await self._run(Calls.set_group_config(queue, group, max_size, max_delay, grace))

    async def delete_group_config(self, queue: str, group: str = "") -> None:
        return await self._run(Calls.delete_group_config(queue, group))

    async def list_group_configs(self, queue: str = "") -> tuple[list[v.GroupConfig], Optional[v.GroupConfig]]:
        return await self._run(Calls.list_group_configs(queue))

    async def list_groups(self, queue: str = "") -> list[v.GroupInfo]:
        return await self._run(Calls.list_groups(queue))

    async def list_strategies(self) -> list[v.TaskTypeRules]:
        return await self._run(Calls.list_strategies())

    async def set_strategies(self, type: str, rules: Sequence[ConcurrencyRule]) -> v.TaskTypeRules:
        return await self._run(Calls.set_strategies(type, rules))

    async def delete_strategies(self, type: str) -> None:
        return await self._run(Calls.delete_strategies(type))

    async def cluster_info(self) -> v.ClusterInfo:
        return await self._run(Calls.cluster_info())

    async def cluster_status(self, *, with_leases: bool = False, with_log: bool = False) -> v.ClusterStatus:
        return await self._run(Calls.cluster_status(with_leases, with_log))

    async def drain_node(self, node_id: str, *, undo: bool = False, wait: Optional[Duration] = None) -> v.DrainResult:
        return await self._run(Calls.drain_node(node_id, undo, wait))

    async def move_partition(self, partition: int, *, to: Optional[str] = None, unpin: bool = False,
                             wait: Optional[Duration] = None) -> v.MoveResult:
        return await self._run(Calls.move_partition(partition, to, unpin, wait))

    async def list_workers(self) -> list[v.WorkerInfo]:
        return await self._run(Calls.list_workers())

    async def activity(self, queue: str = "") -> v.Activity:
        return await self._run(Calls.activity(queue))

    async def set_schedule(self, name: str, type: str, payload: Any = None, *, queue: str = "", cron: Optional[str] = None,
                           time_zone: str = "", every: Optional[Duration] = None, missed_ticks: str = "latest",
                           skip_if_running: bool = False, **task_options: Any) -> v.Schedule:
        return await self._run(Calls.set_schedule(name, type, payload, queue, cron, time_zone, every, missed_ticks,
                                                  skip_if_running, _task_options(task_options)))

    async def list_schedules(self, queue: str = "") -> list[v.Schedule]:
        return await self._run(Calls.list_schedules(queue))

    async def delete_schedule(self, name: str, queue: str = "") -> None:
        return await self._run(Calls.delete_schedule(name, queue))

    async def pause_schedule(self, name: str, queue: str = "") -> v.Schedule:
        return await self._run(Calls.pause_schedule(name, queue))

    async def resume_schedule(self, name: str, queue: str = "") -> v.Schedule:
        return await self._run(Calls.resume_schedule(name, queue))

    async def run_schedule_now(self, name: str, queue: str = "") -> str:
        return await self._run(Calls.run_schedule_now(name, queue))
