"""The worker against a real node: the TypeScript SDK's integration behaviours, in Python."""
from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import grpc
import pytest

from conftest import LEASE_TTL_S, NodeProcess, Recorder, WorkerThread, running, wait_for, wait_state
from conveyor import BatchError, Client, ConcurrencyRule, ConveyorError, Context, Mux, NewTask, SkipRetry, Task, Worker, skip_retry
from conveyor.v1 import admin_service_pb2, admin_service_pb2_grpc


def new_type(name: str) -> str:
    """A task type of this test's own (rules registered for it cannot leak into other tests)."""
    return f"{name}:{uuid.uuid4().hex[:8]}"


def test_enqueue_and_complete_async_and_sync_handlers(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    seen = Recorder()

    @worker.task("py:async")
    async def handle_async(task: Task, ctx: Context) -> dict[str, Any]:
        seen.add(("async", task.id, ctx.lease_id, threading.current_thread() is threading.main_thread()))
        return {"doubled": task.json()["n"] * 2}

    @worker.task("py:sync")
    def handle_sync(task: Task) -> bytes:
        seen.add(("sync", task.id, "", threading.current_thread().name.startswith("conveyor:")))
        return b"raw\x00result"

    with running(worker):
        a = client.enqueue("py:async", {"n": 21}, queue=queue)
        s = client.enqueue("py:sync", None, queue=queue)
        done_a = wait_state(client, a.id, "completed")
        done_s = wait_state(client, s.id, "completed")
    assert done_a.result_json() == {"doubled": 42} and done_a.retried == 0
    assert done_s.result == b"raw\x00result"
    calls = {c[0]: c for c in seen.calls}
    assert calls["async"][2] != ""  # the context carries the lease
    assert calls["sync"][3] is True  # plain functions run in the worker's threads, not on the loop


def test_retry_then_archive(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    attempts = Recorder()

    @worker.task("py:flaky")
    def always_fails(task: Task) -> None:
        attempts.add(task.retried)
        raise ValueError(f"boom {task.retried}")

    with running(worker):
        info = client.enqueue("py:flaky", {}, queue=queue, max_retry=2, backoff_base=0.01, backoff_max=0.05)
        archived = wait_state(client, info.id, "archived")
    assert attempts.calls == [0, 1, 2]  # the first attempt and two retries, then archived
    assert archived.last_error == "boom 2" and archived.last_failed_at is not None


def test_skip_retry_archives_at_once(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    attempts = Recorder()

    @worker.task("py:bad")
    async def bad(task: Task) -> None:
        attempts.add(task.id)
        if task.json()["wrapped"]:
            raise skip_retry(KeyError("no such user"))
        raise SkipRetry("bad address")

    with running(worker):
        plain = client.enqueue("py:bad", {"wrapped": False}, queue=queue, max_retry=5, backoff_base=0.01)
        wrapped = client.enqueue("py:bad", {"wrapped": True}, queue=queue, max_retry=5, backoff_base=0.01)
        t1 = wait_state(client, plain.id, "archived")
        t2 = wait_state(client, wrapped.id, "archived")
    assert sorted(attempts.calls) == sorted([plain.id, wrapped.id])  # one attempt each
    assert (t1.last_error, t1.retried) == ("bad address", 0)
    assert t2.last_error == "'no such user'"


def test_scheduled_task_runs_no_earlier_than_its_time(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    ran = Recorder()
    worker.mux.handle("py:later", lambda task: ran.add(time.time()))
    with running(worker):
        before = time.time()
        info = client.enqueue("py:later", None, queue=queue, process_in=timedelta(seconds=1))
        assert info.state == "scheduled"
        ran.wait(1)
        wait_state(client, info.id, "completed")
    assert ran.calls[0] >= before + 0.95


def test_unique_key_is_held_until_the_task_finishes(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    release = threading.Event()
    worker.mux.handle("py:unique", lambda task, ctx: release.wait(10))
    with running(worker):
        first = client.enqueue("py:unique", {}, queue=queue, unique_key="report:42")
        wait_state(client, first.id, "active")
        with pytest.raises(ConveyorError) as err:
            client.enqueue("py:unique", {}, queue=queue, unique_key="report:42")
        assert (err.value.code, err.value.reason) == ("ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT")
        release.set()
        wait_state(client, first.id, "completed")
        second = client.enqueue("py:unique", {}, queue=queue, unique_key="report:42")  # free again
        wait_state(client, second.id, "completed")


def _peak_per_key(node: NodeProcess, client: Client, queue: str, rules: list[ConcurrencyRule]) -> tuple[dict[str, int], set[str]]:
    """Runs 3 users × 8 tasks on two workers (5 slots each); returns each user's peak of
    tasks running at once and the workers that ran some."""
    task_type = new_type("py:per-user")
    lock = threading.Lock()
    active: dict[str, int] = {}
    peak: dict[str, int] = {}
    workers_used: set[str] = set()

    def make_worker(name: str) -> Worker:
        w = Worker(address=node.address, queues=[queue], concurrency=5, worker_id=f"{name}-{uuid.uuid4().hex[:6]}")

        @w.task(task_type, concurrency=rules)
        async def run(task: Task) -> None:
            user = task.json()["user"]
            with lock:
                active[user] = active.get(user, 0) + 1
                peak[user] = max(peak.get(user, 0), active[user])
                workers_used.add(name)
            await asyncio.sleep(0.2)  # the work; overlap is what is measured
            with lock:
                active[user] -= 1

        return w

    with running(make_worker("w1"), make_worker("w2")):
        infos = client.enqueue_batch([NewTask(task_type, {"user": f"u{i % 3}"}, queue=queue) for i in range(24)])
        for info in infos:
            assert not isinstance(info, ConveyorError)
            wait_state(client, info.id, "completed", timeout=30)
    return peak, workers_used


def test_per_key_limit_is_never_exceeded_with_two_workers(node: NodeProcess, client: Client, queue: str) -> None:
    peak, used = _peak_per_key(node, client, queue, [ConcurrencyRule("input.user", max_runs=2)])
    assert set(peak) == {"u0", "u1", "u2"} and max(peak.values()) == 2  # reached, never exceeded
    assert used == {"w1", "w2"}


def test_per_key_limit_control_without_the_rule_overlaps_more(node: NodeProcess, client: Client, queue: str) -> None:
    """The control: without the rule the same load runs more than 2 of a user at once, so
    the test above would notice a rule that was not registered or not enforced."""
    peak, _ = _peak_per_key(node, client, queue, [])
    assert max(peak.values()) > 2


def test_batch_handler_with_batch_error(node: NodeProcess, client: Client, queue: str) -> None:
    with grpc.insecure_channel(node.address) as ch:
        admin_service_pb2_grpc.AdminServiceStub(ch).SetGroupConfig(admin_service_pb2.SetGroupConfigRequest(
            config=admin_service_pb2.GroupConfig(queue=queue, group="g", max_size=3, max_delay_ms=3_600_000,
                                                 grace_ms=3_600_000)), timeout=10)
    worker = Worker(address=node.address, queues=[queue])
    batches = Recorder()

    @worker.batch_task("py:digest")
    async def digest(tasks: list[Task], ctx: Context) -> None:
        batches.add([t.json()["n"] for t in tasks])
        if len(batches.calls) == 1:
            raise BatchError({tasks[0].id: SkipRetry("bad member"), tasks[1].id: RuntimeError("flaky member")})

    with running(worker):
        infos = client.enqueue_batch([NewTask("py:digest", {"n": n}, queue=queue, group="g", backoff_base=0.05)
                                      for n in range(3)])
        ids = [i.id for i in infos if not isinstance(i, ConveyorError)]
        assert len(ids) == 3
        bad = wait_state(client, ids[0], "archived")
        wait_state(client, ids[2], "completed")
        flaky = wait_state(client, ids[1], "completed")  # retried, and it came back alone
    assert batches.calls == [[0, 1, 2], [1]]
    assert bad.last_error == "bad member" and flaky.retried == 1 and flaky.last_error == "flaky member"


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_cancel_reaches_a_running_handler(node: NodeProcess, client: Client, queue: str, kind: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    started = Recorder()
    observed = Recorder()
    if kind == "async":
        @worker.task("py:long")
        async def long_async(task: Task, ctx: Context) -> None:
            started.add(task.id)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                observed.add(("CancelledError", ctx.cancelled.is_set(), ctx.cancel_reason))
                raise
    else:
        @worker.task("py:long")
        def long_sync(task: Task, ctx: Context) -> None:
            started.add(task.id)
            if ctx.cancelled.wait(60):
                observed.add(("event", True, ctx.cancel_reason))

    with running(worker):
        info = client.enqueue("py:long", None, queue=queue)
        started.wait(1)
        client.cancel_task(info.id)
        what, flag, reason = observed.wait(1, timeout=10)[0]
        assert wait_state(client, info.id, "cancelled").state == "cancelled"
        assert worker.in_flight == 0  # the slot is free at once
    assert what == ("CancelledError" if kind == "async" else "event") and flag
    assert reason.startswith("task cancelled")


def test_attempt_timeout_cancels_the_handler_and_retries(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    observed = Recorder()

    @worker.task("py:slow")
    async def slow(task: Task, ctx: Context) -> str:
        if task.retried > 0:
            return "second time lucky"
        assert ctx.deadline is not None
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            observed.add(ctx.cancel_reason)
            raise
        return "never"

    with running(worker):
        info = client.enqueue("py:slow", None, queue=queue, timeout=0.5, backoff_base=0.01)
        done = wait_state(client, info.id, "completed")
        # The retry can complete before the first handler is cancelled (a loaded machine):
        # wait for that cancellation while the worker runs, or the stop cancels it first
        # and it reads "worker stopping".
        observed.wait(1)
    assert observed.calls[0].startswith("attempt timed out")
    assert done.retried == 1 and done.result == b"second time lucky"


def test_stop_keeps_heartbeating_while_handlers_finish_within_the_grace(node: NodeProcess, client: Client,
                                                                       queue: str) -> None:
    """A grace longer than the lease TTL: the handler that finishes inside it
    completes its task under the same lease, no retry spent."""
    worker = Worker(address=node.address, queues=[queue])
    started = threading.Event()
    finish = threading.Event()

    @worker.task("py:finishing")
    def finishing(task: Task) -> str:
        started.set()
        finish.wait(30)
        return "finished during the grace"

    wt = WorkerThread(worker)
    try:
        info = client.enqueue("py:finishing", None, queue=queue)
        assert started.wait(15)
        stopping = asyncio.run_coroutine_threadsafe(worker.stop(grace=10), wt.loop)
        held_until = time.monotonic() + 1.5 * LEASE_TTL_S  # past the lease TTL: only heartbeats keep it
        wait_for("the stop to outlive the lease TTL", lambda: True if time.monotonic() > held_until else None)
        assert not stopping.done()
        finish.set()
        stopping.result(15)
    finally:
        finish.set()
        wt.stop()
    done = wait_state(client, info.id, "completed")
    assert (done.retried, done.result) == (0, b"finished during the grace")


def test_cancel_in_progress_rule_cancels_the_running_handler(node: NodeProcess, client: Client, queue: str) -> None:
    task_type = new_type("py:latest-wins")
    worker = Worker(address=node.address, queues=[queue], concurrency=4)
    started = Recorder()
    cancelled = Recorder()

    @worker.task(task_type, concurrency=[ConcurrencyRule("input.doc", max_runs=1, strategy="CANCEL_IN_PROGRESS")])
    async def render(task: Task, ctx: Context) -> str:
        started.add(task.json()["v"])
        if task.json()["v"] == 2:
            return "rendered v2"
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.add(ctx.cancel_reason)
            raise
        return "never"

    with running(worker):
        first = client.enqueue(task_type, {"doc": "d1", "v": 1}, queue=queue)
        started.wait(1)
        second = client.enqueue(task_type, {"doc": "d1", "v": 2}, queue=queue)
        assert cancelled.wait(1, timeout=10)[0].startswith("task cancelled")
        done = wait_state(client, second.id, "completed")
        gone = wait_state(client, first.id, "cancelled")
    assert done.result == b"rendered v2" and started.calls == [1, 2] and gone.cancel_reason != ""


def test_a_refused_registration_fails_start_with_the_field(node: NodeProcess, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    worker.mux.handle(new_type("py:bad-rule"), lambda task: None, concurrency=[ConcurrencyRule("input.(", max_runs=1)])
    with pytest.raises(ConveyorError) as err:
        asyncio.run(worker.start())
    assert (err.value.code, err.value.reason) == ("INVALID_ARGUMENT", "INVALID_FIELD")
    assert err.value.field is not None and "expression" in err.value.field


def test_a_worker_leases_from_every_queue_it_names(node: NodeProcess, client: Client, queue: str) -> None:
    seen = Recorder()
    mux = Mux().handle("py:multi", lambda task: seen.add(task.queue))  # handlers on a Mux of their own
    worker = Worker(mux, address=node.address, queues={f"{queue}-a": 3, f"{queue}-b": 1})
    with running(worker):
        ids = [client.enqueue("py:multi", None, queue=f"{queue}-{q}").id for q in "abab"]
        for i in ids:
            wait_state(client, i, "completed")
    assert sorted(seen.calls) == sorted([f"{queue}-a", f"{queue}-b"] * 2)
