"""The asyncio producer client: coalescing of one iteration's enqueues, errors, and use from
inside an async handler."""
from __future__ import annotations

import asyncio

import pytest

from conftest import NodeProcess, Recorder, running, wait_state
from conveyor import AsyncClient, Client, ConveyorError, NewTask, Task, Worker


def test_concurrent_enqueues_of_one_iteration_go_out_as_one_batch(node: NodeProcess, client: Client, queue: str) -> None:
    async def main() -> tuple[list[object], dict[str, int], dict[str, int], dict[str, int]]:
        async with AsyncClient(node.address, timeout=10) as ac:
            before = node.rpc_counts()
            results = await asyncio.gather(
                *(ac.enqueue("py:async-client", {"i": i}, queue=queue) for i in range(20)),
                ac.enqueue("py:async-client", {"i": -1}, queue=queue, priority=0),
                return_exceptions=True)
            middle = node.rpc_counts()
            lone = await ac.enqueue("py:async-client", {"i": 99}, queue=queue)
            after = node.rpc_counts()
            assert (await ac.get_task(lone.id)).json() == {"i": 99}
            assert (await ac.cancel_task(lone.id)).state == "cancelled"
            return list(results), before, middle, after

    results, before, middle, after = asyncio.run(main())
    ok, bad = results[:20], results[20]
    assert all(not isinstance(r, BaseException) for r in ok) and len({r.id for r in ok}) == 20  # type: ignore[union-attr]
    assert isinstance(bad, ConveyorError) and (bad.reason, bad.field) == ("INVALID_FIELD", "task.priority")
    assert bad.message.startswith("task.priority")  # named as the caller's one task, not tasks[20]
    delta = {m: middle.get(m, 0) - before.get(m, 0) for m in middle}
    assert delta.get("enqueueBatch", 0) == 1 and delta.get("enqueue", 0) == 0, delta
    assert after.get("enqueue", 0) - middle.get("enqueue", 0) == 1  # a lone call is a plain Enqueue
    assert client.get_task(ok[3].id).json() == {"i": 3}  # type: ignore[union-attr]


def test_an_async_handler_enqueues_a_follow_up(node: NodeProcess, client: Client, queue: str) -> None:
    worker = Worker(address=node.address, queues=[queue])
    follow_ups = Recorder()
    producer = AsyncClient(node.address)

    @worker.task("py:parent")
    async def parent(task: Task) -> str:
        info = await producer.enqueue_task(NewTask("py:child", {"parent": task.id}, queue=queue))
        return info.id

    worker.mux.handle("py:child", lambda task: follow_ups.add(task.json()["parent"]))
    with running(worker) as wt:
        p = client.enqueue("py:parent", None, queue=queue)
        done = wait_state(client, p.id, "completed")
        wait_state(client, done.result.decode(), "completed")
        asyncio.run_coroutine_threadsafe(producer.close(), wt.loop).result(10)
    assert follow_ups.calls == [p.id]


def test_async_client_errors_are_conveyor_errors(node: NodeProcess) -> None:
    async def main() -> None:
        async with AsyncClient(node.address) as ac:
            with pytest.raises(ConveyorError) as err:
                await ac.get_task("no-such-task")
            assert (err.value.code, err.value.reason) == ("NOT_FOUND", "TASK_NOT_FOUND")

    asyncio.run(main())
