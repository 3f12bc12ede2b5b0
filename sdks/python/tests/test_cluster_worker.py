"""The Python worker in a cluster (issue 13, "Workers"), with real processes: one etcd and
conveyord nodes. Told of one node, the worker keeps a long poll on each owner of its
queues, so a task enqueued on another owner's queue is picked up at once (its long poll
is 20 s: without a poll on that owner the task would wait for it); its polls share one
``concurrency``; its stop fences every node it polled. A worker parked on a queue whose
partition moves (its owner drains, to a node the worker already polls) is told so at once
(``relocated``) and gets the queue's next task, enqueued right after the move, from the
new owner within 1 s."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from cluster_support import Etcd, cluster_status, new_cluster_name, placement, start_node, wait_members_active, workers_on
from conftest import NodeProcess, running, wait_for
from conveyor import Client, NewTask, Worker

IDS = ["n1", "n2", "n3"]


@pytest.fixture(scope="module")
def etcd() -> Iterator[Etcd]:
    e = Etcd()
    try:
        yield e
    finally:
        e.stop()


@pytest.fixture()
def nodes() -> Iterator[list[NodeProcess]]:
    """Nodes the test starts (append them); each is stopped and its data removed after it."""
    started: list[NodeProcess] = []
    try:
        yield started
    finally:
        for n in started:
            n.stop()


class LogLines(logging.Handler):
    """The ``conveyor.worker`` logger's messages while installed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.logger = logging.getLogger("conveyor.worker")

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> "LogLines":
        self.logger.addHandler(self)
        self.previous = self.logger.level
        self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.previous)


def parked_on(node: NodeProcess, worker: Worker, queue: str) -> bool:
    return any(w.polling and queue in w.queues for w in workers_on(node, worker.worker_id))


def test_a_worker_polls_each_owner_picks_a_task_up_at_once_and_never_exceeds_its_concurrency(
        etcd: Etcd, nodes: list[NodeProcess]) -> None:
    cluster = new_cluster_name()
    by_id = {node_id: start_node(etcd, cluster, node_id) for node_id in IDS}
    nodes.extend(by_id.values())
    wait_members_active(nodes)
    owner = {q: o for q, (_, o) in placement("pyq", 60, IDS).items()}
    on_n1, on_n2, on_n3 = (next(q for q, o in owner.items() if o == node_id) for node_id in IDS)
    queues = [on_n1, on_n2, on_n3]

    started: dict[str, float] = {}
    now_running = 0
    most = 0

    async def job(task) -> None:  # type: ignore[no-untyped-def]
        nonlocal now_running, most
        started[task.id] = time.monotonic()
        now_running += 1
        most = max(most, now_running)
        # Work that takes a while, so that overlapping handlers would be seen.
        await asyncio.sleep(0.02)
        now_running -= 1

    worker = Worker(address=by_id["n1"].address, queues=queues, concurrency=3, lease_wait=20)
    worker.mux.handle("py:job", job)
    with running(worker), Client(by_id["n2"].address, timeout=10) as producer:
        # Idle, the worker (told of n1) parks a Lease on each owner for its queue.
        wait_for("a Lease of the worker parked on each owner", lambda: True if all(
            parked_on(by_id[node_id], worker, q) for node_id, q in zip(IDS, queues)) else None, 20)
        assert sorted(worker.polled_nodes) == sorted([by_id["n2"].address, by_id["n3"].address])

        enqueued_at = time.monotonic()
        first = producer.enqueue("py:job", {"n": 0}, queue=on_n3)
        ran_at = wait_for("the task on n3's queue to run", lambda: started.get(first.id), 10)
        pickup_ms = (ran_at - enqueued_at) * 1000
        print(f"python worker: pickup of a task on n3's queue, enqueued through n2, worker told of n1: {pickup_ms:.0f} ms")
        assert pickup_ms < 1000

        # Work on every owner at once: the three polls share the worker's three slots (an
        # idle poll holds one, so with fewer slots than owners one would wait for a slot).
        infos = producer.enqueue_batch([NewTask(type="py:job", payload={"i": i}, queue=q) for q in queues for i in range(20)])
        ids = [i.id for i in infos]  # type: ignore[union-attr]
        assert len(ids) == 60
        wait_for("every task to run", lambda: True if all(i in started for i in ids) else None, 30)
        assert most == 3
        # Idle again: each owner has the worker's Lease parked for its own queue.
        wait_for("a Lease parked on each owner again", lambda: True if all(
            parked_on(by_id[node_id], worker, q) for node_id, q in zip(IDS, queues)) else None, 10)
    # The stop fenced every node it polled: each forgets the worker at once (unfenced, a
    # node would list it for a minute after its last call).
    wait_for("every node to forget the worker", lambda: True if not workers_on(by_id["n2"], worker.worker_id) else None, 5)


def test_a_worker_parked_on_a_draining_owner_gets_the_next_task_from_the_new_owner_within_a_second(
        etcd: Etcd, nodes: list[NodeProcess]) -> None:
    """n2 drains (SIGTERM) while the worker has a Lease parked on it: the call ends with the
    relocated hint, and the queue moves to n3, where the worker already has a Lease parked
    for another queue; that loop polls the newcomer at once (a top-up call) rather than at
    its parked call's next turn (20 s)."""
    cluster = new_cluster_name()
    by_id = {node_id: start_node(etcd, cluster, node_id) for node_id in IDS}
    nodes.extend(by_id.values())
    wait_members_active(nodes)
    every = placement("pyd", 200, IDS)
    without_n2 = placement("pyd", 200, ["n1", "n3"])
    from_n2 = next(q for q in every if every[q][1] == "n2" and without_n2[q][1] == "n3")
    on_n3 = next(q for q in every if every[q][1] == "n3")
    partition = every[from_n2][0]
    n1, n2, n3 = (by_id[i] for i in IDS)

    started: dict[str, float] = {}
    lock = threading.Lock()

    def job(task) -> None:  # type: ignore[no-untyped-def]
        with lock:
            started[task.id] = time.monotonic()

    worker = Worker(address=n1.address, queues=[from_n2, on_n3], concurrency=4, lease_wait=20)
    worker.mux.handle("py:job", job)
    with LogLines() as logs, running(worker), Client(n1.address, timeout=10) as producer:
        wait_for("the worker to park on n2 and on n3", lambda: True if parked_on(n2, worker, from_n2)
                 and parked_on(n3, worker, on_n3) else None, 20)

        n2.stop()  # SIGTERM: every partition is handed off before it exits
        assert n2.proc.returncode == 0
        wait_for(f"n3 to hold partition {partition} of {from_n2}",
                 lambda: True if cluster_status(n3).partition_states[partition].owner == "n3" else None, 15)

        enqueued_at = time.monotonic()
        task = producer.enqueue("py:job", None, queue=from_n2)
        ran_at = wait_for("the task enqueued after the drain to run", lambda: started.get(task.id), 10)
        pickup_ms = (ran_at - enqueued_at) * 1000
        print(f"python worker: pickup of the first task enqueued after n2 drained, on a node already polled: {pickup_ms:.0f} ms (long poll 20 s)")
        assert pickup_ms < 1000
        # The parked call on n2 ended with the hint (not at the end of its wait).
        assert any(f"queues {from_n2} is moving off the node at {n2.address}" in line for line in logs.lines), logs.lines
        assert worker.polled_nodes == [n3.address]
