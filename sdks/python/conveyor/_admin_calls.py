"""The admin API's calls, written once for :class:`~conveyor.admin.Admin` and
:class:`~conveyor.admin.AsyncAdmin`: each builds its request (checking what the SDK can
check, so bad input is refused before the call, naming the field) and says how to read
the answer; the two classes only run them, blocking or on asyncio."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Optional, TypeVar

from . import admin_views as v
from .errors import ConveyorError
from .mux import ConcurrencyRule
from .task import ConveyorValueError, Duration, NewTask, Task, task_from_wire, to_spec
from .v1 import admin_service_pb2 as apb
from .v1 import task_pb2

__all__ = ["BULK_ACTIONS", "Call", "Calls", "rule_to_wire"]

T = TypeVar("T")

#: Bulk actions by name (BulkTaskAction): what each does to every task of a queue in one state.
BULK_ACTIONS = {"retry": apb.BULK_ACTION_RETRY, "archive": apb.BULK_ACTION_ARCHIVE, "delete": apb.BULK_ACTION_DELETE,
                "cancel": apb.BULK_ACTION_CANCEL}
#: The longest wait DrainNode and MovePartition accept (the node refuses more, naming wait_ms).
PLACEMENT_WAIT_MAX_MS = 600_000


@dataclass(frozen=True)
class Call(Generic[T]):
    """One AdminService call: the stub's method name, its request, how to read the answer,
    and how much longer than the usual deadline the node may take (a wait it was asked for)."""

    method: str
    request: Any
    read: Callable[[Any], T]
    extra_timeout: float = 0.0


def _invalid(field: str, message: str) -> ConveyorError:
    return ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", message, field)


def _state(state: str) -> int:
    names = v.STATE_NAMES
    if state not in names:
        raise _invalid("state", f"unknown task state {state!r}; use one of {', '.join(names)}")
    return int(task_pb2.TaskState.Value(f"TASK_STATE_{state.upper()}"))


def _ms(d: Optional[Duration], field: str, max_ms: Optional[int] = None) -> int:
    if d is None:
        return 0
    if not isinstance(d, (timedelta, int, float)) or isinstance(d, bool):
        raise _invalid(field, f"{field} must be a timedelta or a number of seconds (got {d!r})")
    ms = round((d.total_seconds() if isinstance(d, timedelta) else float(d)) * 1000)
    if ms < 0 or (max_ms is not None and ms > max_ms):
        raise _invalid(field, f"{field} must be between 0 and {max_ms // 1000 if max_ms else 'any'} s (got {d!r})")
    return ms


def rule_to_wire(r: ConcurrencyRule) -> task_pb2.ConcurrencyRule:
    try:
        strategy = task_pb2.LimitStrategy.Value(f"LIMIT_STRATEGY_{r.strategy}")
    except ValueError:
        strategy = task_pb2.LIMIT_STRATEGY_UNSPECIFIED  # the node refuses it with INVALID_FIELD
    return task_pb2.ConcurrencyRule(
        name=r.name, expression=r.expression, max_runs=r.max_runs if isinstance(r.max_runs, int) else 0,
        max_runs_expression=r.max_runs if isinstance(r.max_runs, str) else "", strategy=strategy,
    )


def _task(res: Any) -> Task:
    return task_from_wire(res.task)


def _none(_: Any) -> None:
    return None


class Calls:
    """Every AdminService call (see :class:`~conveyor.admin.Admin` for what each does)."""

    # ---- queues ------------------------------------------------------------------------
    @staticmethod
    def list_queues() -> Call[list[v.QueueInfo]]:
        return Call("ListQueues", apb.ListQueuesRequest(), lambda r: [v.queue_from_wire(q) for q in r.queues])

    @staticmethod
    def pause_queue(queue: str) -> Call[v.QueueInfo]:
        return Call("PauseQueue", apb.PauseQueueRequest(queue=queue), lambda r: v.queue_from_wire(r.queue))

    @staticmethod
    def resume_queue(queue: str) -> Call[v.QueueInfo]:
        return Call("ResumeQueue", apb.ResumeQueueRequest(queue=queue), lambda r: v.queue_from_wire(r.queue))

    @staticmethod
    def delete_queue(queue: str) -> Call[int]:
        return Call("DeleteQueue", apb.DeleteQueueRequest(queue=queue), lambda r: int(r.deleted_tasks))

    # ---- tasks -------------------------------------------------------------------------
    @staticmethod
    def list_tasks(queue: str, state: Optional[str], page_size: int, page_token: Optional[str]) -> Call[v.TaskPage]:
        request = apb.ListTasksRequest(queue=queue, state=_state(state) if state is not None else 0, page_size=page_size,
                                       page_token=page_token or "")
        return Call("ListTasks", request, lambda r: v.TaskPage([task_from_wire(t) for t in r.tasks], r.next_page_token or None))

    @staticmethod
    def get_task(id: str) -> Call[Task]:
        return Call("GetTask", apb.AdminServiceGetTaskRequest(id=id), lambda r: task_from_wire(r.task, r.attempts))

    @staticmethod
    def cancel_task(id: str) -> Call[Task]:
        return Call("CancelTask", apb.AdminServiceCancelTaskRequest(id=id), _task)

    @staticmethod
    def run_task(id: str) -> Call[Task]:
        return Call("RunTask", apb.RunTaskRequest(id=id), _task)

    @staticmethod
    def archive_task(id: str) -> Call[Task]:
        return Call("ArchiveTask", apb.ArchiveTaskRequest(id=id), _task)

    @staticmethod
    def retry_task(id: str) -> Call[Task]:
        return Call("RetryTask", apb.RetryTaskRequest(id=id), _task)

    @staticmethod
    def delete_task(id: str) -> Call[None]:
        return Call("DeleteTask", apb.DeleteTaskRequest(id=id), _none)

    @staticmethod
    def bulk_task_action(queue: str, action: str, state: str) -> Call[int]:
        if action not in BULK_ACTIONS:
            raise _invalid("action", f"unknown bulk action {action!r}; use one of {', '.join(BULK_ACTIONS)}")
        request = apb.BulkTaskActionRequest(queue=queue, state=_state(state), action=BULK_ACTIONS[action])
        return Call("BulkTaskAction", request, lambda r: int(r.affected))

    # ---- limits ------------------------------------------------------------------------
    @staticmethod
    def set_concurrency_limit(queue: str, max: int) -> Call[v.ConcurrencyLimit]:
        return Call("SetQueueConcurrencyLimit", apb.SetQueueConcurrencyLimitRequest(queue=queue, max=max),
                    lambda r: v.concurrency_limit_from_wire(r.limit))

    @staticmethod
    def delete_concurrency_limit(queue: str) -> Call[None]:
        return Call("DeleteQueueConcurrencyLimit", apb.DeleteQueueConcurrencyLimitRequest(queue=queue), _none)

    @staticmethod
    def list_concurrency_limits() -> Call[list[v.ConcurrencyLimit]]:
        return Call("ListConcurrencyLimits", apb.ListConcurrencyLimitsRequest(),
                    lambda r: [v.concurrency_limit_from_wire(l) for l in r.limits])

    @staticmethod
    def set_rate_limit(queue: str, rate_per_sec: float, burst: int) -> Call[v.RateLimit]:
        return Call("SetQueueRateLimit", apb.SetQueueRateLimitRequest(queue=queue, rate_per_sec=rate_per_sec, burst=burst),
                    lambda r: v.rate_limit_from_wire(r.limit))

    @staticmethod
    def delete_rate_limit(queue: str) -> Call[None]:
        return Call("DeleteQueueRateLimit", apb.DeleteQueueRateLimitRequest(queue=queue), _none)

    @staticmethod
    def list_rate_limits() -> Call[tuple[list[v.RateLimit], Optional[v.RateLimit]]]:
        return Call("ListRateLimits", apb.ListRateLimitsRequest(), lambda r: (
            [v.rate_limit_from_wire(l) for l in r.limits],
            v.rate_limit_from_wire(r.default_limit) if r.HasField("default_limit") else None))

    # ---- groups ------------------------------------------------------------------------
    @staticmethod
    def set_group_config(queue: str, group: str, max_size: Optional[int], max_delay: Optional[Duration],
                         grace: Optional[Duration]) -> Call[v.GroupConfig]:
        config = apb.GroupConfig(queue=queue, group=group, max_size=max_size or 0, max_delay_ms=_ms(max_delay, "max_delay"),
                                 grace_ms=_ms(grace, "grace"))
        return Call("SetGroupConfig", apb.SetGroupConfigRequest(config=config), lambda r: v.group_config_from_wire(r.config))

    @staticmethod
    def delete_group_config(queue: str, group: str) -> Call[None]:
        return Call("DeleteGroupConfig", apb.DeleteGroupConfigRequest(queue=queue, group=group), _none)

    @staticmethod
    def list_group_configs(queue: str) -> Call[tuple[list[v.GroupConfig], Optional[v.GroupConfig]]]:
        return Call("ListGroupConfigs", apb.ListGroupConfigsRequest(queue=queue), lambda r: (
            [v.group_config_from_wire(c) for c in r.configs],
            v.group_config_from_wire(r.server_default) if r.HasField("server_default") else None))

    @staticmethod
    def list_groups(queue: str) -> Call[list[v.GroupInfo]]:
        return Call("ListGroups", apb.ListGroupsRequest(queue=queue), lambda r: [v.group_from_wire(g) for g in r.groups])

    # ---- strategies --------------------------------------------------------------------
    @staticmethod
    def list_strategies() -> Call[list[v.TaskTypeRules]]:
        return Call("ListStrategies", apb.ListStrategiesRequest(), lambda r: [v.type_rules_from_wire(t) for t in r.types])

    @staticmethod
    def set_strategies(type: str, rules: Sequence[ConcurrencyRule]) -> Call[v.TaskTypeRules]:
        return Call("SetStrategies", apb.SetStrategiesRequest(type=type, rules=[rule_to_wire(r) for r in rules]),
                    lambda r: v.type_rules_from_wire(r.rules))

    @staticmethod
    def delete_strategies(type: str) -> Call[None]:
        return Call("DeleteStrategies", apb.DeleteStrategiesRequest(type=type), _none)

    # ---- node and cluster --------------------------------------------------------------
    @staticmethod
    def cluster_info() -> Call[v.ClusterInfo]:
        return Call("GetClusterInfo", apb.GetClusterInfoRequest(), v.cluster_info_from_wire)

    @staticmethod
    def cluster_status(with_leases: bool, with_log: bool) -> Call[v.ClusterStatus]:
        return Call("GetClusterStatus", apb.GetClusterStatusRequest(with_leases=with_leases, with_log=with_log),
                    v.cluster_status_from_wire)

    @staticmethod
    def drain_node(node_id: str, undo: bool, wait: Optional[Duration]) -> Call[v.DrainResult]:
        wait_ms = _ms(wait, "wait", PLACEMENT_WAIT_MAX_MS)
        return Call("DrainNode", apb.DrainNodeRequest(node_id=node_id, undo=undo, wait_ms=wait_ms), v.drain_from_wire, wait_ms / 1000)

    @staticmethod
    def move_partition(partition: int, to: Optional[str], unpin: bool, wait: Optional[Duration]) -> Call[v.MoveResult]:
        if unpin == (to is not None):
            raise _invalid("to", "move_partition: give either to=NODE or unpin=True")
        wait_ms = _ms(wait, "wait", PLACEMENT_WAIT_MAX_MS)
        request = apb.MovePartitionRequest(partition=partition, to_node_id=to or "", unpin=unpin, wait_ms=wait_ms)
        return Call("MovePartition", request, v.move_from_wire, wait_ms / 1000)

    @staticmethod
    def list_workers() -> Call[list[v.WorkerInfo]]:
        return Call("ListWorkers", apb.ListWorkersRequest(), lambda r: [v.worker_from_wire(w) for w in r.workers])

    @staticmethod
    def activity(queue: str) -> Call[v.Activity]:
        return Call("GetActivity", apb.GetActivityRequest(queue=queue), v.activity_from_wire)

    # ---- schedules ---------------------------------------------------------------------
    @staticmethod
    def set_schedule(name: str, type: str, payload: Any, queue: str, cron: Optional[str], time_zone: str,
                     every: Optional[Duration], missed_ticks: str, skip_if_running: bool,
                     task_options: Mapping[str, Any]) -> Call[v.Schedule]:
        if (cron is None) == (every is None):
            raise _invalid("cron", "set_schedule: give either cron=EXPRESSION or every=DURATION")
        if missed_ticks not in ("latest", "skip"):
            raise _invalid("missed_ticks", f"missed_ticks must be 'latest' or 'skip' (got {missed_ticks!r})")
        try:
            spec = to_spec(NewTask(type, payload, queue=queue, **task_options))
        except ConveyorValueError as e:
            raise _invalid(f"task.{e.field}", str(e)) from None
        except TypeError as e:
            raise _invalid("task", f"set_schedule: {e}") from None
        schedule = apb.Schedule(
            name=name, task=spec, time_zone=time_zone if cron is not None else "",
            missed_ticks=apb.MISSED_TICKS_SKIP if missed_ticks == "skip" else apb.MISSED_TICKS_LATEST,
            skip_if_running=skip_if_running,
        )
        if cron is not None:
            schedule.cron = cron
        else:
            schedule.interval_ms = _ms(every, "every")
        return Call("SetSchedule", apb.SetScheduleRequest(schedule=schedule), lambda r: v.schedule_from_wire(r.schedule))

    @staticmethod
    def list_schedules(queue: str) -> Call[list[v.Schedule]]:
        return Call("ListSchedules", apb.ListSchedulesRequest(queue=queue), lambda r: [v.schedule_from_wire(s) for s in r.schedules])

    @staticmethod
    def delete_schedule(name: str, queue: str) -> Call[None]:
        return Call("DeleteSchedule", apb.DeleteScheduleRequest(queue=queue, name=name), _none)

    @staticmethod
    def pause_schedule(name: str, queue: str) -> Call[v.Schedule]:
        return Call("PauseSchedule", apb.PauseScheduleRequest(queue=queue, name=name), lambda r: v.schedule_from_wire(r.schedule))

    @staticmethod
    def resume_schedule(name: str, queue: str) -> Call[v.Schedule]:
        return Call("ResumeSchedule", apb.ResumeScheduleRequest(queue=queue, name=name), lambda r: v.schedule_from_wire(r.schedule))

    @staticmethod
    def run_schedule_now(name: str, queue: str) -> Call[str]:
        return Call("RunScheduleNow", apb.RunScheduleNowRequest(queue=queue, name=name), lambda r: str(r.task_id))


#: The task options a schedule's task may carry (no id, no absolute instants, no unique key).
SCHEDULE_TASK_OPTIONS = frozenset({"priority", "max_retry", "timeout", "process_in", "retention", "expires_in", "concurrency_key",
                                   "group", "metadata", "content_type", "backoff_base", "backoff_max"})

