"""Fixtures: a real conveyord (node dist/src/main.js via bin/conveyord.js) on ephemeral ports
with a temp data dir, and helpers that wait on conditions with a deadline (never sleep as
synchronisation)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import queue as queue_mod
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional, TypeVar

import pytest

SDK = Path(__file__).resolve().parent.parent
REPO = SDK.parent.parent
sys.path.insert(0, str(SDK))

from conveyor import Client, Worker  # noqa: E402

T = TypeVar("T")
NODE = os.environ.get("CONVEYOR_NODE_BIN") or shutil.which("node") or "node"
PYTHON = "/usr/bin/python3"
#: The session node's lease TTL: short, so a crashed worker's task comes back quickly, yet
#: long enough that a loaded machine does not miss heartbeats (every third of it).
LEASE_TTL = "2s"
LEASE_TTL_S = 2.0


def wait_for(what: str, probe: Callable[[], Optional[T]], timeout: float = 15.0) -> T:
    """Polls `probe` until it returns something other than None (another process decides
    when); fails naming what was awaited and the last error."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = probe()
            if value is not None:
                return value
        except Exception as e:  # noqa: BLE001 - reported on timeout
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last error: {last!r}")
        time.sleep(0.02)


class NodeProcess:
    """A conveyord child process; `address` is its gRPC host:port."""

    def __init__(self, settings: dict[str, str], data_dir: Optional[str] = None, port: str = "0") -> None:
        if not (REPO / "dist" / "src" / "main.js").exists():
            raise RuntimeError("dist/ is missing: run `npm run build` first (npm test does)")
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="conveyor-pytest-")
        args = [NODE, str(REPO / "bin" / "conveyord.js"), "--data-dir", self.data_dir, "--listen", f"127.0.0.1:{port}",
                "--http", "127.0.0.1:0", "--log-level", "info"]
        for k, v in settings.items():
            args += ["--set", f"{k}={v}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.logs: list[str] = []
        self.stderr: list[str] = []
        listening = threading.Event()
        found: dict[str, str] = {}

        def read_stdout() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:  # drained to the end, so the node never blocks on a full pipe
                self.logs.append(line)
                if not listening.is_set():
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if entry.get("msg") == "conveyord listening":
                        found.update(grpc=entry["grpc"], http=entry["http"])
                        listening.set()
            listening.set()

        def read_stderr() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr.append(line)

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        if not listening.wait(30) or "grpc" not in found:
            self.proc.kill()
            raise RuntimeError(f"conveyord did not start; stderr: {''.join(self.stderr)}")
        self.address = found["grpc"]
        self.http_address = found["http"]

    def rpc_counts(self) -> dict[str, int]:
        """Calls handled so far per RPC method (the node's conveyor_rpc_duration_seconds_count)."""
        import re
        import urllib.request

        text = urllib.request.urlopen(f"http://{self.http_address}/metrics", timeout=10).read().decode()
        counts: dict[str, int] = {}
        for method, n in re.findall(r'conveyor_rpc_duration_seconds_count\{method="([^"]+)"[^}]*\} (\d+)', text):
            counts[method] = counts.get(method, 0) + int(n)
        return counts

    def stop(self, keep_data: bool = False) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def node() -> Iterator[NodeProcess]:
    # A short lease (heartbeats every ~670 ms) makes redelivery after a crash and
    # cancellation quick; groups are swept often.
    n = NodeProcess({"lease_ttl": LEASE_TTL})
    try:
        yield n
    finally:
        n.stop()


@pytest.fixture()
def client(node: NodeProcess) -> Iterator[Client]:
    with Client(node.address, timeout=10) as c:
        yield c


@pytest.fixture()
def queue() -> str:
    """A queue of this test's own."""
    return f"py-{uuid.uuid4().hex[:10]}"


def wait_state(client: Client, task_id: str, state: str, timeout: float = 15.0):  # type: ignore[no-untyped-def]
    def probe():  # type: ignore[no-untyped-def]
        t = client.get_task(task_id)
        return t if t.state == state else None

    return wait_for(f"task {task_id} to be {state}", probe, timeout)


class WorkerThread:
    """Runs `worker` on an asyncio loop in a background thread, so tests stay synchronous."""

    def __init__(self, *workers: Worker) -> None:
        self.workers = workers
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        for w in workers:
            asyncio.run_coroutine_threadsafe(w.start(), self.loop).result(30)

    def stop(self, grace: float = 0.0) -> None:
        for w in self.workers:
            asyncio.run_coroutine_threadsafe(w.stop(grace=grace), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@contextlib.contextmanager
def running(*workers: Worker) -> Iterator[WorkerThread]:
    wt = WorkerThread(*workers)
    try:
        yield wt
    finally:
        wt.stop()


class Recorder:
    """Thread-safe record of handler calls; tests wait on it with a deadline."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[Any] = []

    def add(self, item: Any) -> None:
        with self.lock:
            self.calls.append(item)

    def wait(self, n: int, timeout: float = 15.0) -> list[Any]:
        return wait_for(f"{n} handler calls", lambda: list(self.calls) if len(self.calls) >= n else None, timeout)


def spawn_lines(args: list[str]) -> tuple[subprocess.Popen[str], "queue_mod.Queue[str]"]:
    """Starts a helper process whose stdout lines arrive on a queue (read by a thread)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: "queue_mod.Queue[str]" = queue_mod.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


def next_line(proc: subprocess.Popen[str], lines: "queue_mod.Queue[str]", prefix: str, timeout: float = 20.0) -> str:
    """The helper's next stdout line starting with `prefix` (fails with its stderr on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            err = proc.stderr.read() if proc.poll() is not None and proc.stderr else "(still running)"
            raise AssertionError(f"no {prefix!r} line from {proc.args}; stderr: {err}")
        try:
            line = lines.get(timeout=min(left, 0.5))
        except queue_mod.Empty:
            continue
        if line.startswith(prefix):
            return line
