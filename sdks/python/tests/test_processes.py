"""Worker processes killed and stopped, a node restart, TypeScript ↔ Python interop, and the
generated-code check."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import LEASE_TTL_S, NODE, PYTHON, REPO, SDK, NodeProcess, Recorder, next_line, running, spawn_lines, wait_for, wait_state
from conveyor import Client, Task, Worker, encode_json

HERE = Path(__file__).resolve().parent


def worker_process(node: NodeProcess, queue: str, task_type: str, mode: str) -> tuple[subprocess.Popen[str], object]:
    proc, lines = spawn_lines([PYTHON, str(HERE / "worker_proc.py"), node.address, queue, task_type, mode])
    next_line(proc, lines, "ready")
    return proc, lines


def test_sigkill_worker_task_is_redelivered_after_the_lease(node: NodeProcess, client: Client, queue: str) -> None:
    proc, lines = worker_process(node, queue, "py:crash", "hang-async")
    worker = Worker(address=node.address, queues=[queue])
    seen = Recorder()
    worker.mux.handle("py:crash", lambda task: seen.add((time.monotonic(), task.retried, task.json())))
    try:
        info = client.enqueue("py:crash", {"k": 1}, queue=queue, backoff_base=0.01)
        assert next_line(proc, lines, "started").split() == ["started", info.id, "0"]  # type: ignore[arg-type]
        # A second worker polls the queue from now on: it gets the task only once the
        # process's lease (kept alive by its heartbeats) has lapsed after the kill.
        with running(worker):
            held_until = time.monotonic() + 1.5 * LEASE_TTL_S
            wait_for("the lease to outlive its TTL", lambda: True if time.monotonic() > held_until else None)
            assert client.get_task(info.id).state == "active" and seen.calls == []
            proc.kill()
            proc.wait(10)
            killed_at = time.monotonic()
            done = wait_state(client, info.id, "completed")
    finally:
        if proc.poll() is None:
            proc.kill()
    at, retried, payload = seen.calls[0]
    assert payload == {"k": 1} and done.retried == retried == 1  # the lapsed lease counted as a failed attempt
    assert at >= killed_at


@pytest.mark.parametrize("mode", ["hang-async", "hang-sync"])
def test_sigterm_releases_the_running_task_without_spending_a_retry(node: NodeProcess, client: Client, queue: str,
                                                                    mode: str) -> None:
    proc, lines = worker_process(node, queue, "py:drain", mode)
    try:
        info = client.enqueue("py:drain", None, queue=queue, max_retry=3)
        next_line(proc, lines, "started")
        assert client.get_task(info.id).state == "active"
        proc.send_signal(signal.SIGTERM)
        next_line(proc, lines, "stopped", timeout=10)
        assert proc.wait(10) == 0  # a plain-function handler that ignores cancellation does not block the exit
    finally:
        if proc.poll() is None:
            proc.kill()
    released = client.get_task(info.id)
    assert (released.state, released.retried, released.last_error) == ("pending", 0, "")
    worker = Worker(address=node.address, queues=[queue])
    seen = Recorder()
    worker.mux.handle("py:drain", lambda task: seen.add(task.retried))
    with running(worker):
        wait_state(client, info.id, "completed")
    assert seen.calls == [0]


def test_worker_reconnects_when_the_node_restarts(client: Client) -> None:
    with socket.socket() as s:  # a port the restarted node can take again
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    node = NodeProcess({"lease_ttl": "1s"}, port=port)
    data_dir = node.data_dir
    worker = Worker(address=node.address, queues=["restart"])
    seen = Recorder()
    worker.mux.handle("py:restart", lambda task: seen.add(task.json()))
    try:
        with running(worker), Client(node.address, timeout=20) as c:
            c.enqueue("py:restart", {"before": True}, queue="restart")
            seen.wait(1)
            node.stop(keep_data=True)
            node = NodeProcess({"lease_ttl": "1s"}, data_dir=data_dir, port=port)
            c.enqueue("py:restart", {"after": True}, queue="restart")
            seen.wait(2, timeout=20)
    finally:
        node.stop()
    assert seen.calls == [{"before": True}, {"after": True}]


def test_typescript_producer_python_worker(node: NodeProcess, client: Client, queue: str) -> None:
    out = subprocess.run([NODE, str(HERE / "ts_producer.mjs"), node.address, queue, "xlang"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    ids = json.loads(out.stdout.split("enqueued ", 1)[1])
    worker = Worker(address=node.address, queues=[queue])
    got: dict[str, Task] = {}
    worker.mux.handle("xlang", lambda task: got.__setitem__(task.id, task))
    with running(worker):
        wait_state(client, ids["json"], "completed")
        wait_state(client, ids["bytes"], "completed")
    meta = {"tenant": "acme", "trace-id": "t-ü-1"}
    value = {"to": "ada@example.com", "n": 3, "note": "héllo ✓", "list": [1, 2.5, None]}
    j, b = got[ids["json"]], got[ids["bytes"]]
    assert j.payload == encode_json(value)  # the same bytes the Python SDK would send
    assert (j.json(), j.content_type, j.metadata) == (value, "application/json", meta)
    assert (b.payload, b.content_type, b.metadata) == (b"\x00\x01\xfe\xff", "application/x-test", meta)


def test_python_producer_typescript_worker(node: NodeProcess, client: Client, queue: str) -> None:
    proc, lines = spawn_lines([NODE, str(HERE / "ts_worker.mjs"), node.address, queue, "xlang"])
    try:
        next_line(proc, lines, "ready")
        meta = {"tenant": "acme", "trace-id": "t-ü-1"}
        j = client.enqueue("xlang", {"to": "ada@example.com", "note": "héllo ✓", "n": 1.5}, queue=queue, metadata=meta)
        b = client.enqueue("xlang", b"\x00\x01\xfe\xff", queue=queue, metadata=meta, content_type="application/x-test")
        seen = {}
        for _ in range(2):
            line = json.loads(next_line(proc, lines, "got ").split(" ", 1)[1])  # type: ignore[arg-type]
            seen[line["id"]] = line
        done = wait_state(client, j.id, "completed")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert seen[j.id] == {"id": j.id, "payloadHex": '{"to":"ada@example.com","note":"héllo ✓","n":1.5}'.encode().hex(),
                          "contentType": "application/json", "metadata": meta}
    assert seen[b.id] == {"id": b.id, "payloadHex": "0001feff", "contentType": "application/x-test", "metadata": meta}
    assert done.result_json() == {"seen": j.id}


def test_generated_code_matches_a_fresh_generation() -> None:
    out = subprocess.run([PYTHON, str(SDK / "scripts" / "generate.py"), "--check"], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "matches a fresh generation" in out.stdout
