"""The admin API (sync and asyncio), wait_for_result, schedules and the attempt history
against a real node (issue 38): typed answers (datetimes, timedeltas, state names), every
action round-tripped, bad input refused naming the field."""
from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timedelta

import pytest

from conftest import NodeProcess, running, wait_state
from conveyor import (
    Admin, AsyncAdmin, AsyncClient, Client, ConcurrencyRule, ConveyorError, Task, TaskFailedError, WaitTimeoutError, Worker,
)


def refused(call, *args, **kwargs) -> ConveyorError:  # type: ignore[no-untyped-def]
    with pytest.raises(ConveyorError) as err:
        call(*args, **kwargs)
    return err.value


# ---- wait_for_result ---------------------------------------------------------------------

def test_wait_for_result_returns_the_completed_task_when_the_worker_finishes(node: NodeProcess, client: Client, queue: str) -> None:
    release = threading.Event()
    worker = Worker(address=node.address, queues=[queue])

    @worker.task("py:wait-ok")
    def handle(task: Task) -> dict[str, int]:
        release.wait(10)
        return {"answer": 42}

    info = client.enqueue("py:wait-ok", {}, queue=queue)
    with running(worker):
        waiting: list[Task] = []
        waiter = threading.Thread(target=lambda: waiting.append(client.wait_for_result(info.id, timeout=20)))
        waiter.start()
        wait_state(client, info.id, "active")
        assert waiting == []  # not before the task ends
        release.set()
        waiter.join(20)
    assert waiting[0].state == "completed" and waiting[0].result_json() == {"answer": 42}


def test_wait_for_result_raises_task_failed_when_archived(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])

    @worker.task("py:wait-fail")
    def handle(task: Task) -> None:
        raise RuntimeError("boom")

    info = client.enqueue("py:wait-fail", {}, queue=queue, max_retry=0)
    with running(worker):
        with pytest.raises(TaskFailedError) as err:
            client.wait_for_result(info.id, timeout=timedelta(seconds=20))
    assert err.value.task.state == "archived"
    assert str(err.value) == f"task {info.id} was archived: boom"


def test_wait_for_result_times_out_naming_the_state_and_refuses_bad_input(client: Client, queue: str) -> None:
    info = client.enqueue("py:none", {}, queue=queue)
    started = time.monotonic()
    with pytest.raises(WaitTimeoutError) as err:
        client.wait_for_result(info.id, timeout=0.4)
    waited = time.monotonic() - started
    print(f"wait_for_result(timeout=0.4) gave up after {waited:.3f} s")
    assert str(err.value) == f"task {info.id} did not finish within 0.4 s (it is pending)"
    assert waited >= 0.38
    assert refused(client.wait_for_result, "py-no-such-task", timeout=1).reason == "TASK_NOT_FOUND"
    assert refused(client.wait_for_result, info.id, timeout=0).field == "timeout"
    client.cancel_task(info.id)
    with pytest.raises(TaskFailedError, match=f"^task {info.id} was cancelled"):
        client.wait_for_result(info.id)


# ---- the attempt history ------------------------------------------------------------------

def test_get_task_carries_the_attempt_history(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    calls: list[int] = []

    @worker.task("py:flaky-once")
    def handle(task: Task) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        return "ok"

    info = client.enqueue("py:flaky-once", {}, queue=queue, max_retry=1, backoff_base=0.01)
    with running(worker):
        wait_state(client, info.id, "completed")
    for task in (client.get_task(info.id), client.admin.get_task(info.id)):
        assert [(a.number, a.outcome, a.error) for a in task.attempts] == [(1, "failed", "first try fails"), (2, "succeeded", "")]
        first = task.attempts[0]
        assert isinstance(first.started_at, datetime) and first.ended_at is not None and first.ended_at >= first.started_at
        assert task.attempts[1].worker_id == worker.worker_id
    assert client.admin.list_tasks(queue).tasks[0].attempts == []  # lists carry none


# ---- the admin API ---------------------------------------------------------------------

def test_admin_queues_tasks_and_bulk_actions(client: Client, queue: str) -> None:
    admin = client.admin
    ids = [client.enqueue("py:adm", {}, queue=queue).id for _ in range(3)]
    q = admin.get_queue(queue)
    assert q is not None and q.counts["pending"] == 3 and q.concurrency_limit is None and not q.paused
    assert admin.pause_queue(queue).paused and not admin.resume_queue(queue).paused
    first = admin.list_tasks(queue, state="pending", page_size=2)
    assert [t.id for t in first.tasks] == ids[:2] and first.next_page_token is not None
    assert [t.id for t in admin.tasks(queue, state="pending", page_size=2)] == ids
    assert admin.archive_task(ids[0]).state == "archived"
    assert admin.retry_task(ids[0]).state == "pending"
    assert admin.archive_all(queue, "pending") == 3
    assert admin.retry_all(queue) == 3
    assert admin.cancel_all(queue, "pending") == 3
    assert admin.delete_all(queue, "cancelled") == 3
    assert refused(admin.bulk_task_action, queue, "retry", "pending").code == "INVALID_ARGUMENT"
    bad = refused(admin.bulk_task_action, queue, "purge", "pending")
    assert (bad.field, bad.message) == ("action", "unknown bulk action 'purge'; use one of retry, archive, delete, cancel")
    assert refused(admin.list_tasks, queue, state="done").field == "state"
    later = client.enqueue("py:adm", {}, queue=queue, process_in=3600)
    assert admin.run_task(later.id).state == "pending"
    busy = refused(admin.delete_queue, queue)
    assert (busy.code, busy.reason) == ("FAILED_PRECONDITION", "QUEUE_HAS_UNFINISHED_TASKS")
    admin.cancel_task(later.id)
    admin.delete_task(later.id)
    assert refused(admin.get_task, later.id).reason == "TASK_NOT_FOUND"
    assert admin.delete_queue(queue) == 0
    assert admin.get_queue(queue) is None


def test_admin_limits_groups_and_strategies(node: NodeProcess, queue: str) -> None:
    with Admin(node.address, timeout=10) as admin:
        assert admin.set_concurrency_limit(queue, 3).max == 3
        assert any(l.queue == queue and l.max == 3 for l in admin.list_concurrency_limits())
        admin.delete_concurrency_limit(queue)
        assert admin.set_rate_limit(queue, 2.5, burst=4).burst == 4
        limits, _default = admin.list_rate_limits()
        assert any(l.queue == queue and l.rate_per_sec == 2.5 for l in limits)
        admin.delete_rate_limit(queue)
        assert refused(admin.delete_rate_limit, queue).reason == "LIMIT_NOT_FOUND"

        config = admin.set_group_config(queue, "g1", max_size=5, max_delay=timedelta(hours=1), grace=30)
        assert (config.max_size, config.max_delay, config.grace) == (5, timedelta(hours=1), timedelta(seconds=30))
        assert admin.list_group_configs(queue)[0] == [config]
        with Client(node.address) as client:
            client.enqueue("py:batch", {}, queue=queue, group="g1")
        [group] = admin.list_groups(queue)
        assert (group.group, group.state, group.size) == ("g1", "aggregating", 1) and group.next_fire_at is not None
        admin.delete_group_config(queue, "g1")
        assert refused(admin.set_group_config, queue, "g2", max_delay="soon").field == "max_delay"

        rules = admin.set_strategies(f"{queue}:ruled", [ConcurrencyRule("input.user", 2)])
        assert rules.rules == [ConcurrencyRule("input.user", 2, "GROUP_ROUND_ROBIN")] and rules.updated_at is not None
        assert any(t.type == f"{queue}:ruled" for t in admin.list_strategies())
        admin.delete_strategies(f"{queue}:ruled")


def test_admin_node_workers_activity_and_cluster_calls(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue], concurrency=3)

    @worker.task("py:seen")
    def handle(task: Task) -> str:
        return "ok"

    with running(worker):
        wait_state(client, client.enqueue("py:seen", {}, queue=queue).id, "completed")
        seen = [w for w in client.admin.list_workers() if queue in w.queues]
    assert [(w.worker_id, w.types, w.concurrency) for w in seen] == [(worker.worker_id, ["py:seen"], 3)]
    assert isinstance(seen[0].last_seen_at, datetime)
    activity = client.admin.activity(queue)
    assert activity.bucket == timedelta(minutes=1)
    assert sum(b.enqueued for b in activity.buckets) == 1 and sum(b.completed for b in activity.buckets) == 1
    info = client.admin.cluster_info()
    assert (info.node_id, True) in info.members and info.started_at is not None
    status = client.admin.cluster_status()
    assert (status.clustered, status.phase, status.serving) == (False, "active", True)
    assert status.members[0].state == "active" and status.members[0].lease_left is None
    assert len(status.partition_states) == status.partitions and status.partition_states[0].owner == status.node_id
    assert refused(client.admin.drain_node, status.node_id, wait=1).reason == "NOT_A_CLUSTER"
    assert refused(client.admin.move_partition, 0, to=status.node_id).reason == "NOT_A_CLUSTER"
    assert refused(client.admin.move_partition, 0).field == "to"
    assert refused(client.admin.drain_node, "x", wait=timedelta(hours=1)).field == "wait"


def test_admin_schedules(client: Client, queue: str) -> None:
    admin = client.admin
    s = admin.set_schedule("nightly", "py:report", {"kind": "daily"}, queue=queue, cron="0 3 * * *", time_zone="Europe/Berlin",
                           priority=7, timeout=60)
    assert (s.queue, s.name, s.cron, s.time_zone, s.every, s.missed_ticks) == (queue, "nightly", "0 3 * * *", "Europe/Berlin", None, "latest")
    assert s.next_tick_at is not None and s.next_tick_at > s.created_at  # type: ignore[operator]
    every = admin.set_schedule("often", "py:tick", None, queue=queue, every=timedelta(minutes=5), skip_if_running=True,
                               missed_ticks="skip")
    assert (every.every, every.cron, every.skip_if_running, every.missed_ticks) == (timedelta(minutes=5), None, True, "skip")
    assert sorted(x.name for x in admin.list_schedules(queue)) == ["nightly", "often"]
    assert admin.pause_schedule("nightly", queue).paused
    assert not admin.resume_schedule("nightly", queue).paused
    task_id = admin.run_schedule_now("nightly", queue)
    assert client.get_task(task_id).json() == {"kind": "daily"} and client.get_task(task_id).priority == 7
    admin.delete_schedule("often", queue)
    assert [x.name for x in admin.list_schedules(queue)] == ["nightly"]
    assert refused(admin.set_schedule, "both", "t", queue=queue, cron="* * * * *", every=60).field == "cron"
    assert refused(admin.set_schedule, "id", "t", queue=queue, every=60, task_id="x").field == "task.task_id"
    assert refused(admin.set_schedule, "bad", "t", queue=queue, cron="not a cron").code == "INVALID_ARGUMENT"


def test_async_admin_and_async_wait_for_result(node: NodeProcess, client: Client, queue: str) -> None:
    async def main() -> None:
        async with AsyncClient(node.address, timeout=10) as ac:
            info = await ac.enqueue("py:async-adm", {}, queue=queue)
            q = await ac.admin.get_queue(queue)
            assert q is not None and q.counts["pending"] == 1
            assert [t.id async for t in ac.admin.tasks(queue)] == [info.id]
            with pytest.raises(WaitTimeoutError):
                await ac.wait_for_result(info.id, timeout=0.2)
            assert (await ac.admin.cancel_task(info.id)).state == "cancelled"
            with pytest.raises(TaskFailedError):
                await ac.wait_for_result(info.id)
            assert (await ac.get_task(info.id)).attempts == []
        async with AsyncAdmin(node.address) as admin:
            assert await admin.delete_all(queue, "cancelled") == 1
            with pytest.raises(ConveyorError) as err:
                await admin.bulk_task_action(queue, "nope", "pending")
            assert err.value.field == "action"
            assert (await admin.cluster_status()).clustered is False

    asyncio.run(main())


# ---- failures keep their stack ---------------------------------------------------------

def _fetch_invoice() -> None:
    try:
        raise ConnectionResetError("socket hang up")
    except ConnectionResetError as e:
        raise RuntimeError("upstream 503 Service Unavailable") from e


def test_a_raised_exception_keeps_its_traceback_and_cause(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])

    @worker.task("py:stack")
    def handle(task: Task) -> None:
        _fetch_invoice()

    info = client.enqueue("py:stack", {}, queue=queue, max_retry=0)
    with running(worker):
        wait_state(client, info.id, "archived")
    [attempt] = client.get_task(info.id).attempts
    assert attempt.error == "upstream 503 Service Unavailable"
    lines = attempt.stack.split("\n")
    assert lines[0] == "Traceback (most recent call last):"
    assert any(", in _fetch_invoice" in line and "test_admin.py" in line for line in lines)
    assert "RuntimeError: upstream 503 Service Unavailable" in lines
    cause = lines.index("Caused by: ConnectionResetError: socket hang up")
    assert cause > lines.index("RuntimeError: upstream 503 Service Unavailable")


def test_stack_of_is_bounded_and_follows_causes() -> None:
    from conveyor._error_stack import ATTEMPT_STACK_MAX_BYTES, stack_of

    def deep(n: int) -> None:
        if n == 0:
            raise ValueError("é" * 3000)
        deep(n - 1)

    try:
        deep(50)
    except ValueError as e:
        text = stack_of(e)
    assert len(text.encode()) <= ATTEMPT_STACK_MAX_BYTES and "…[truncated " in text
    assert text.startswith("Traceback (most recent call last):\n")
    try:
        try:
            raise KeyError("inner")
        except KeyError:
            raise TypeError("outer")  # an implicit cause: the exception being handled
    except TypeError as e:
        assert "Caused by: KeyError: 'inner'" in stack_of(e)


# ---- workers speak -----------------------------------------------------------------------

def test_worker_logs_start_registration_failures_and_stop(node: NodeProcess, client: Client, queue: str,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="conveyor.worker")
    worker = Worker(address=node.address, queues=[queue], concurrency=3)

    @worker.task("py:log-fail")
    def handle(task: Task) -> None:
        raise RuntimeError("upstream 503")

    info = client.enqueue("py:log-fail", {}, queue=queue, max_retry=1, backoff_base=0.01)
    with running(worker):
        wait_state(client, info.id, "archived")
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "conveyor.worker"]
    assert lines[0] == ("INFO", f"starting: node {node.address}, queues {queue}, concurrency 3, task types py:log-fail")
    assert lines[1] == ("INFO", f"registered with the node at {node.address} as {worker.worker_id}")
    assert ("WARNING", f"task py:log-fail {info.id} failed (attempt 1 of 2): upstream 503; the node retries it") in lines
    assert ("WARNING", f"task py:log-fail {info.id} failed (attempt 2 of 2): upstream 503; archived (no retries left)") in lines
    assert lines[-2:] == [("INFO", "draining: no new tasks; none running"), ("INFO", "stopped: 2 task(s) run, 2 failed")]
