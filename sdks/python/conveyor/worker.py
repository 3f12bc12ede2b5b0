"""The worker: leases deliveries with a long poll, runs them through a Mux with a total
concurrency bound, heartbeats its leases at the node's interval, and settles outcomes in
batches. The same promises as the TypeScript SDK's worker (src/sdk/worker.ts):

- One Lease call is in flight at a time per node polled, asking for free slots; it parks
  on the node until work exists, so pickup needs no polling. In a cluster the worker keeps
  one such long poll on each node that holds some of its queues (_lease_loops.py), and the
  polls share the one ``concurrency``: handlers running on all nodes together never
  exceed it.
- Outcomes finished in the same event-loop iteration go out in one Settle call.
- A lost lease, a cancel request (operator, CANCEL_IN_PROGRESS), the attempt's end or the
  stop set the handler's ``ctx.cancelled`` (and cancel an ``async`` handler). Such an
  attempt is not settled (the node has moved on) and its slot is freed at once. A settle
  that cannot reach the node is retried until it does or the lease lapses (then the node
  retries the task: at-least-once).
- The attempt's end (its timeout or the task's deadline) is enforced by the node; the
  worker mirrors it, measured from the time the node had left when it leased the delivery
  (clock skew cannot make the worker give up first).
- ``stop(grace)`` stops leasing, waits up to `grace` for running handlers, then releases
  the rest (RELEASED: back to pending at once, no retry spent), telling the node it is
  draining so a Lease call still in flight cannot take them back.

Everything runs on one asyncio event loop (grpc.aio). ``async def`` handlers run on it;
plain functions run each in a daemon thread (a thread that ignores its cancellation then
cannot block the process's exit).
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Optional, Union

import grpc
import grpc.aio

from ._admin_calls import rule_to_wire
from ._error_stack import stack_of
from ._channel import TlsOption, aio_channel, auth_metadata, channel_credentials, default_address
from ._lease_loops import LeaseLoops
from ._status import from_item_error, from_rpc_error
from .errors import BatchError, is_skip_retry
from .mux import BatchHandler, ConcurrencyRule, Context, Handler, Mux, encode_result, is_async, wants_context
from .task import Duration, task_from_wire
from .v1 import worker_service_pb2 as wpb, worker_service_pb2_grpc

__all__ = ["Worker"]

log = logging.getLogger("conveyor.worker")
# Characters of an error a failure line shows: the task keeps all of it (task get).
_LOGGED_ERROR_MAX_CHARS = 500

LEASE_QUEUES_MAX = 100
HEARTBEAT_LEASES_MAX = 1000
SETTLEMENTS_MAX = 1000
REQUEST_MAX_BYTES = 4 * 1024 * 1024
SETTLE_MAX_BYTES = REQUEST_MAX_BYTES - 64 * 1024
RESULT_MAX_BYTES = 1024 * 1024
ERROR_MESSAGE_MAX_BYTES = 64 * 1024
RECONNECT_BASE_S = 0.1
#: Reconnect/retry backoff cap: a restarted node is picked up within about a second.
RECONNECT_MAX_S = 1.0


def _seconds(d: Duration) -> float:
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


def _jitter(s: float) -> float:
    return s / 2 + random.random() * (s / 2)


def _stack(member: BaseException | str) -> str:
    """A batch member's stack: "" for an error given as a string."""
    return stack_of(member) if isinstance(member, BaseException) else ""


def _truncate(data: bytes, max_bytes: int) -> bytes:
    """The node keeps a result or error over its limit truncated; cutting it here saves sending it."""
    if len(data) <= max_bytes:
        return data
    keep = max(0, max_bytes - 32)
    while keep > 0 and (data[keep] & 0xC0) == 0x80:  # back to a UTF-8 character start
        keep -= 1
    return data[:keep] + f"…[truncated {_format_bytes(len(data) - keep)}]".encode()


def _format_bytes(n: int) -> str:
    """"512 bytes", "12 KiB", "28.6 MiB" (src/base/limits.ts formatBytes)."""
    if n < 1024:
        return f"{n} bytes"
    value, unit = (n / 1024, "KiB") if n < 1024 * 1024 else (n / (1024 * 1024), "MiB")
    return f"{round(value, 1):g} {unit}"


def _message(error: object) -> str:
    if isinstance(error, BaseException):
        return str(error) or type(error).__name__
    return str(error)


def attempt_end(delivery: wpb.Delivery, lease_ttl_ms: int, received_at: float) -> Optional[float]:
    """When a delivery's attempt ends on this process's monotonic clock (None: no end). The
    node leased it at ``lease_expires_at_ms - lease_ttl_ms`` on its own clock; the time it had
    left then, counted from when the answer arrived here, ends a little after the node's
    instant whatever the skew between the clocks."""
    if delivery.deadline_at_ms <= 0:
        return None
    if lease_ttl_ms <= 0:
        return received_at + max(0.0, delivery.deadline_at_ms / 1000 - time.time())
    leased_at_ms = delivery.lease_expires_at_ms - lease_ttl_ms
    return received_at + max(0, delivery.deadline_at_ms - leased_at_ms) / 1000


class _Running:
    __slots__ = ("delivery", "ctx", "abandoned", "waiter")

    def __init__(self, delivery: wpb.Delivery, ctx: Context) -> None:
        self.delivery = delivery
        self.ctx = ctx
        #: Set when the outcome must not be reported (lease lost, cancelled, timed out, released).
        self.abandoned = False
        #: What the attempt awaits (the async handler's task or the thread's future).
        self.waiter: Optional[asyncio.Future[Any]] = None


class Worker:
    """Runs handlers for leased tasks.

    ``Worker(queues={"critical": 6, "default": 3}, concurrency=20)``; register handlers with
    ``@worker.task(type)`` / ``@worker.batch_task(type)`` (or pass a :class:`Mux`), then
    ``worker.run()`` (blocks; SIGTERM or SIGINT stop it gracefully) or, inside asyncio,
    ``await worker.start()`` … ``await worker.stop()``.

    `queues`: queue names (weight 1 each) or a mapping of queue → weight. `lease_wait`: how
    long one Lease call parks on the node (default 30 s). `on_error(error, context)` is
    called for errors the worker handles itself (lost connection, failed settle); the default
    logs them to the ``conveyor.worker`` logger. `token` and `tls` as for
    :class:`~conveyor.Client`: every call of the worker carries them, on its node and on the
    owners of its queues it polls in a cluster. A node with an auth file refuses a worker
    without a token: :meth:`start` raises UNAUTHENTICATED.
    """

    def __init__(
        self,
        mux: Optional[Mux] = None,
        *,
        address: Optional[str] = None,
        queues: Union[Sequence[str], Mapping[str, int]] = ("default",),
        concurrency: int = 10,
        lease_wait: Duration = 30.0,
        worker_id: Optional[str] = None,
        on_error: Optional[Callable[[BaseException, str], None]] = None,
        token: Optional[str] = None,
        tls: TlsOption = None,
    ) -> None:
        self.mux = mux if mux is not None else Mux()
        self.address = address
        # Every channel of the worker (to its node and to the owners it polls) uses these.
        self._metadata = auth_metadata(token)
        self._credentials = channel_credentials(tls)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        if isinstance(queues, Mapping):
            self._queues = [(q, int(w)) for q, w in queues.items()]
        else:
            if isinstance(queues, str):
                raise TypeError("Worker: queues is a list of names or a mapping of name → weight, not a string")
            self._queues = [(q, 1) for q in queues]
        if not self._queues:
            raise ValueError("Worker: name at least one queue")
        if len(self._queues) > LEASE_QUEUES_MAX:
            raise ValueError(f"Worker: at most {LEASE_QUEUES_MAX} queues (got {len(self._queues)})")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError("Worker: concurrency must be a positive integer")
        self.concurrency = concurrency
        self._lease_wait_ms = round(_seconds(lease_wait) * 1000)
        self._on_error = on_error
        self._running: dict[str, _Running] = {}
        self._outbox: list[wpb.Settlement] = []
        #: Tasks settled (released ones not counted) and of those failed, for the stop line.
        self._tasks_run = 0
        self._tasks_failed = 0
        self._settling: set[asyncio.Task[None]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flush_scheduled = False
        self._stopping = False
        self._closed = False
        self._started = False
        self._heartbeat_s = 10.0
        self._heartbeat_handle: Optional[asyncio.TimerHandle] = None
        self._heartbeating = False
        self._loops: Optional[LeaseLoops] = None
        self._loop_task: Optional[asyncio.Task[None]] = None
        self._stopped: Optional[asyncio.Event] = None
        self._drained: Optional[asyncio.Event] = None
        self._channel: Optional[grpc.aio.Channel] = None
        self._stub: Any = None

    # -- registration ------------------------------------------------------------------

    def task(self, type: str, *, concurrency: Sequence[ConcurrencyRule] = ()) -> Callable[[Any], Any]:
        """Decorator: ``@worker.task("email:send", concurrency=[ConcurrencyRule("input.user_id", 2)])``."""
        return self.mux.task(type, concurrency=concurrency)

    def batch_task(self, type: str) -> Callable[[Any], Any]:
        """Decorator: ``@worker.batch_task("digest")`` receives every member of a fired group."""
        return self.mux.batch_task(type)

    @property
    def declared_types(self) -> list[str]:
        """The task types this worker has handlers for (registered at start; the Lease call
        names them, and its batch types)."""
        return self.mux.types

    @property
    def in_flight(self) -> int:
        """Handlers running now."""
        return len(self._running)

    # -- lifecycle -------------------------------------------------------------------

    def run(self, *, grace: Duration = 10.0, handle_signals: bool = True) -> None:
        """Starts the worker and blocks until SIGTERM or SIGINT (with `handle_signals`), then
        stops gracefully: running handlers get `grace` to finish, the rest are released."""

        async def main() -> None:
            await self.start()
            assert self._stopped is not None
            stop_requested = asyncio.Event()
            loop = asyncio.get_running_loop()
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.add_signal_handler(sig, stop_requested.set)
            waits = [asyncio.ensure_future(stop_requested.wait()), asyncio.ensure_future(self._stopped.wait())]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for w in waits:
                w.cancel()
            await self.stop(grace=grace)

        asyncio.run(main())

    async def start(self) -> None:
        """Registers the handled types and their concurrency rules (retried while the node is
        unreachable; raises ConveyorError if the node refuses them), then leases in the
        background."""
        if self._started:
            raise RuntimeError("Worker already started")
        self._started = True
        self._stopped = asyncio.Event()
        self._drained = asyncio.Event()
        self._channel = self._connect(self.address)
        self._stub = worker_service_pb2_grpc.WorkerServiceStub(self._channel)
        self._loops = LeaseLoops(connect=self._connect,
            worker_id=self.worker_id, queues=self._queues, concurrency=self.concurrency, lease_wait_ms=self._lease_wait_ms,
            main_address=default_address(self.address), main_stub=self._stub, base=self._lease_base,
            running=lambda: len(self._running), deliver=self._deliver, report=self._report)
        batch_types = [t for t in self.mux.types if self.mux.batch_handler_for(t) is not None]
        log.info("starting: node %s, queues %s, concurrency %d, task types %s%s", default_address(self.address),
                 ", ".join(q for q, _ in self._queues), self.concurrency, ", ".join(self.mux.types) or "(none)",
                 f"; batch types {', '.join(batch_types)}" if batch_types else "")
        try:
            await self._register()
        except BaseException:
            self._stopping = True
            self._stopped.set()
            await self._channel.close()
            raise
        self._loop_task = asyncio.ensure_future(self._loops.run())

    async def stop(self, *, grace: Duration = 10.0) -> None:
        """Graceful stop: no new leases; running handlers get `grace` to finish, then the rest
        are cancelled and released without spending a retry. A second call waits for the first."""
        if not self._started:
            return
        assert self._loops is not None and self._drained is not None and self._stopped is not None
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        self._loops.stop()
        if self._loop_task is not None:
            try:
                await self._loop_task
            except asyncio.CancelledError:
                pass
        log.info("draining: no new tasks; %s", f"{len(self._running)} running get up to {_seconds(grace):g} s to finish"
                 if self._running else "none running")
        if self._running:
            self._drained.clear()
            if self._running:
                try:
                    await asyncio.wait_for(self._drained.wait(), _seconds(grace))
                except asyncio.TimeoutError:
                    pass
        for entry in list(self._running.values()):
            self._abandon(entry, "worker stopping: task released")
            for t in entry.delivery.tasks:
                self._outbox.append(self._settlement(entry.delivery, t.id, wpb.OUTCOME_RELEASED, b"", ""))
        # Always sent, even with nothing to release: it also fences off a Lease call of ours
        # that may still reach the node after this point; so does the draining Settle to
        # every other node polled (a node's fence is its own).
        await asyncio.gather(self._flush_settles(draining=True), self._loops.fence())
        while self._settling:
            await asyncio.gather(*list(self._settling), return_exceptions=True)
        self._closed = True
        if self._heartbeat_handle is not None:
            self._heartbeat_handle.cancel()
        assert self._channel is not None
        await self._loops.close()
        await self._channel.close()
        log.info("stopped: %d task(s) run, %d failed", self._tasks_run, self._tasks_failed)
        self._stopped.set()

    def _connect(self, address: Optional[str]) -> grpc.aio.Channel:
        return aio_channel(address, self._credentials, self._metadata)

    async def _register(self) -> None:
        types = [wpb.TaskTypeRegistration(type=t, concurrency=[rule_to_wire(r) for r in self.mux.rules_for(t)])
                 for t in self.mux.types]
        request = wpb.RegisterTaskTypesRequest(worker_id=self.worker_id, types=types)
        attempt = 0
        while True:
            try:
                await self._stub.RegisterTaskTypes(request, timeout=10.0)
                log.info("registered with the node at %s as %s", default_address(self.address), self.worker_id)
                return
            except grpc.aio.AioRpcError as e:
                error = from_rpc_error(e)
                if self._stopping or error.code != "UNAVAILABLE":
                    raise error from None
                self._report(error, "register")
                attempt += 1
                await asyncio.sleep(_jitter(min(RECONNECT_MAX_S, RECONNECT_BASE_S * 2 ** min(attempt, 10))))

    # -- leasing -----------------------------------------------------------------------

    def _lease_base(self) -> dict[str, Any]:
        """What every Lease call says besides its queues and size. Naming its types, the
        worker leases only tasks it has handlers for (others stay pending)."""
        return dict(worker_id=self.worker_id, batch_types=self.mux.batch_types, types=self.declared_types,
                    host=socket.gethostname(), concurrency=self.concurrency)

    def _deliver(self, res: wpb.LeaseResponse) -> None:
        """Runs a Lease answer's deliveries (each takes a slot at once)."""
        if res.heartbeat_interval_ms > 0:
            self._heartbeat_s = res.heartbeat_interval_ms / 1000
        received_at = time.monotonic()
        for d in res.deliveries:
            self._start_delivery(d, attempt_end(d, res.lease_ttl_ms, received_at))

    @property
    def polled_nodes(self) -> list[str]:
        """Addresses of the nodes other than its own that the worker polls now (their queues' owners)."""
        return self._loops.nodes if self._loops is not None else []

    # -- running -----------------------------------------------------------------------

    def _start_delivery(self, delivery: wpb.Delivery, ends_at: Optional[float]) -> None:
        deadline = None
        if ends_at is not None:
            deadline = datetime.now(timezone.utc) + timedelta(seconds=ends_at - time.monotonic())
        entry = _Running(delivery, Context(delivery.lease_id, deadline))
        self._running[delivery.lease_id] = entry
        self._arm_heartbeat()
        self._spawn(self._attempt(entry, ends_at))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attempt(self, entry: _Running, ends_at: Optional[float]) -> None:
        loop = asyncio.get_running_loop()
        timer = None
        if ends_at is not None:
            timer = loop.call_later(max(0.0, ends_at - time.monotonic()), self._abandon, entry,
                                    "attempt timed out: its deadline passed, the node has failed this attempt")
        try:
            outcome = await self._execute(entry)
        finally:
            if timer is not None:
                timer.cancel()
        if not entry.abandoned:
            self._running.pop(entry.delivery.lease_id, None)
            self._outbox.extend(outcome)
            self._log_outcomes(entry.delivery, outcome)
            self._schedule_flush()
            self._freed()

    def _log_outcomes(self, d: wpb.Delivery, outcome: Sequence[wpb.Settlement]) -> None:
        """A line per failed task (type, id, attempt, error, what happens next); counts for the stop line."""
        for s in outcome:
            if s.outcome == wpb.OUTCOME_RELEASED:
                continue
            self._tasks_run += 1
            if s.outcome == wpb.OUTCOME_SUCCESS:
                continue
            self._tasks_failed += 1
            t = next((t for t in d.tasks if t.id == s.task_id), None)
            if t is None:
                continue
            skip = s.outcome == wpb.OUTCOME_SKIP_RETRY
            then = "archived (skip retry)" if skip else "archived (no retries left)" if t.retried >= t.max_retry else "the node retries it"
            error = s.error if len(s.error) <= _LOGGED_ERROR_MAX_CHARS else f"{s.error[:_LOGGED_ERROR_MAX_CHARS]}… ({len(s.error)} characters)"
            log.warning("task %s %s failed (attempt %d of %d): %s; %s", t.type, t.id, t.retried + 1, t.max_retry + 1, error, then)

    def _freed(self) -> None:
        assert self._loops is not None and self._drained is not None
        self._loops.slots.freed()
        if not self._running:
            self._drained.set()

    def _abandon(self, entry: _Running, reason: str) -> None:
        """Stops waiting for an attempt: nothing is settled for it, its slot is free, its
        handler is told (ctx.cancelled; an async handler is cancelled)."""
        if entry.abandoned:
            return
        entry.abandoned = True
        if self._running.get(entry.delivery.lease_id) is entry:
            del self._running[entry.delivery.lease_id]
        entry.ctx._cancel(reason)
        if entry.waiter is not None and not entry.waiter.done():
            entry.waiter.cancel()
        self._freed()

    async def _call_handler(self, entry: _Running, fn: Callable[..., Any], arg: Any) -> Any:
        args = (arg, entry.ctx) if wants_context(fn) else (arg,)
        if is_async(fn):
            entry.waiter = asyncio.ensure_future(fn(*args))
        else:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[Any] = loop.create_future()
            entry.waiter = future

            def settle_future(ok: bool, value: Any) -> None:
                if future.done():
                    return
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

            def target() -> None:
                try:
                    value: Any = fn(*args)
                    ok = True
                except BaseException as e:  # noqa: BLE001 - handed to the loop
                    value, ok = e, False
                try:
                    loop.call_soon_threadsafe(settle_future, ok, value)
                except RuntimeError:
                    pass  # the loop is gone (the worker stopped): nothing to report to

            threading.Thread(target=target, name=f"conveyor:{entry.delivery.lease_id}", daemon=True).start()
        if entry.abandoned:  # abandoned before the waiter existed
            entry.waiter.cancel()
        value = await entry.waiter
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            entry.waiter = asyncio.ensure_future(value)
            value = await entry.waiter
        return value

    async def _execute(self, entry: _Running) -> list[wpb.Settlement]:
        """Runs the handler and turns its return or raise into settlements ([] once abandoned)."""
        d = entry.delivery
        if d.batch:
            return await self._execute_batch(entry)
        task = d.tasks[0]
        handler: Optional[Handler] = self.mux.handler_for(task.type)
        view: Any = task_from_wire(task)
        if handler is None:
            batch = self.mux.batch_handler_for(task.type)
            if batch is None:
                return [self._settlement(d, task.id, wpb.OUTCOME_RETRY, b"",
                                         f"no handler registered for task type {task.type!r}")]
            handler, view = batch, [view]
        try:
            value = await self._call_handler(entry, handler, view)
        except asyncio.CancelledError:
            if entry.abandoned:
                return []
            raise
        except BaseException as e:  # noqa: BLE001 - every failure is an outcome
            if entry.abandoned:
                return []
            if isinstance(e, BatchError):  # a batch handler serving a single task
                member = e.errors.get(task.id)
                if member is None:
                    return [self._settlement(d, task.id, wpb.OUTCOME_SUCCESS, b"", "")]
                return [self._settlement(d, task.id, wpb.OUTCOME_SKIP_RETRY if is_skip_retry(member) else wpb.OUTCOME_RETRY,
                                         b"", _message(member), _stack(member))]
            return [self._settlement(d, task.id, wpb.OUTCOME_SKIP_RETRY if is_skip_retry(e) else wpb.OUTCOME_RETRY,
                                     b"", _message(e), stack_of(e))]
        if entry.abandoned:
            return []
        try:
            result = encode_result(value) if not isinstance(view, list) else b""
        except (TypeError, ValueError) as e:
            return [self._settlement(d, task.id, wpb.OUTCOME_RETRY, b"", f"the handler's result is not JSON-serializable: {e}")]
        return [self._settlement(d, task.id, wpb.OUTCOME_SUCCESS, result, "")]

    async def _execute_batch(self, entry: _Running) -> list[wpb.Settlement]:
        """A group batch: one call of the type's batch handler, one outcome per member."""
        d = entry.delivery
        type_ = d.tasks[0].type
        handler: Optional[BatchHandler] = self.mux.batch_handler_for(type_)

        def all_(outcome: int, error: str, stack: str = "") -> list[wpb.Settlement]:
            return [self._settlement(d, t.id, outcome, b"", error, stack) for t in d.tasks]

        if handler is None:
            return all_(wpb.OUTCOME_RETRY, f"no batch handler registered for task type {type_!r}")
        try:
            await self._call_handler(entry, handler, [task_from_wire(t) for t in d.tasks])
        except asyncio.CancelledError:
            if entry.abandoned:
                return []
            raise
        except BaseException as e:  # noqa: BLE001 - every failure is an outcome
            if entry.abandoned:
                return []
            if not isinstance(e, BatchError):
                return all_(wpb.OUTCOME_SKIP_RETRY if is_skip_retry(e) else wpb.OUTCOME_RETRY, _message(e), stack_of(e))
            out = []
            for t in d.tasks:
                if t.id not in e.errors:
                    out.append(self._settlement(d, t.id, wpb.OUTCOME_SUCCESS, b"", ""))
                else:
                    member = e.errors[t.id]
                    out.append(self._settlement(d, t.id, wpb.OUTCOME_SKIP_RETRY if is_skip_retry(member) else wpb.OUTCOME_RETRY,
                                                b"", _message(member), _stack(member)))
            return out
        if entry.abandoned:
            return []
        return all_(wpb.OUTCOME_SUCCESS, "")

    @staticmethod
    def _settlement(d: wpb.Delivery, task_id: str, outcome: int, result: bytes, error: str, stack: str = "") -> wpb.Settlement:
        return wpb.Settlement(queue=d.queue, lease_id=d.lease_id, task_id=task_id, outcome=outcome,  # type: ignore[arg-type]
                              result=_truncate(result, RESULT_MAX_BYTES),
                              error=_truncate(error.encode(), ERROR_MESSAGE_MAX_BYTES).decode(errors="replace"), stack=stack)

    # -- settling ----------------------------------------------------------------------

    def _schedule_flush(self) -> None:
        if self._flush_scheduled:
            return
        self._flush_scheduled = True

        def flush() -> None:
            self._flush_scheduled = False
            self._spawn(self._flush_settles())

        asyncio.get_running_loop().call_soon(flush)

    async def _flush_settles(self, draining: bool = False) -> None:
        """Sends every queued outcome in as few calls as the node's bounds allow; when
        draining, every call says so (and one is sent even with nothing to settle)."""
        if not self._outbox and not draining:
            return
        items, self._outbox = self._outbox, []
        batches: list[list[wpb.Settlement]] = []
        chunk: list[wpb.Settlement] = []
        size = 0
        for s in items:
            n = s.ByteSize() + 8
            if chunk and (len(chunk) >= SETTLEMENTS_MAX or size + n > SETTLE_MAX_BYTES):
                batches.append(chunk)
                chunk, size = [], 0
            chunk.append(s)
            size += n
        if chunk or not batches:
            batches.append(chunk)
        sends = [asyncio.ensure_future(self._send_settles(b, draining)) for b in batches]
        for s in sends:
            self._settling.add(s)
            s.add_done_callback(self._settling.discard)
        await asyncio.gather(*sends, return_exceptions=True)

    async def _send_settles(self, batch: list[wpb.Settlement], draining: bool) -> None:
        """Sends `batch` until every item is answered for good: the whole call again while
        the node is unreachable, and the items it refused UNAVAILABLE again (their
        partition's log did not acknowledge the commit, or the partition was moving);
        dropping those would leave a finished task active until its lease lapsed. A settle
        sent again is idempotent by lease."""
        pending = batch
        for attempt in range(21):
            request = wpb.SettleRequest(worker_id=self.worker_id, settlements=pending, worker_draining=draining)
            try:
                res = await self._stub.Settle(request, timeout=30.0, wait_for_ready=True)
            except grpc.aio.AioRpcError as e:
                error = from_rpc_error(e)
                self._report(error, "settle")
                if error.code != "UNAVAILABLE":
                    return
            else:
                again: list[wpb.Settlement] = []
                for item, r in zip(pending, res.results):
                    if r.HasField("error"):
                        refused = from_item_error(r.error)
                        self._report(refused, "settle")
                        if refused.code == "UNAVAILABLE":
                            again.append(item)
                if not again:
                    return
                pending = again
            await asyncio.sleep(_jitter(min(RECONNECT_MAX_S, RECONNECT_BASE_S * 2 ** attempt)))

    # -- heartbeats --------------------------------------------------------------------

    def _arm_heartbeat(self) -> None:
        # Heartbeats go on while a stop waits out its grace (the leases must stay held).
        if self._heartbeat_handle is not None or self._heartbeating or not self._running or self._closed:
            return

        def fire() -> None:
            self._heartbeat_handle = None
            self._heartbeating = True
            self._spawn(self._heartbeat())

        self._heartbeat_handle = asyncio.get_running_loop().call_later(self._heartbeat_s, fire)

    async def _heartbeat(self) -> None:
        try:
            leases = [wpb.LeaseRef(queue=r.delivery.queue, lease_id=r.delivery.lease_id) for r in self._running.values()]
            chunks = [leases[i:i + HEARTBEAT_LEASES_MAX] for i in range(0, len(leases), HEARTBEAT_LEASES_MAX)]
            await asyncio.gather(*(self._heartbeat_chunk(c) for c in chunks))
        finally:
            self._heartbeating = False
            self._arm_heartbeat()

    async def _heartbeat_chunk(self, leases: list[wpb.LeaseRef]) -> None:
        try:
            res = await self._stub.Heartbeat(wpb.HeartbeatRequest(worker_id=self.worker_id, leases=leases),
                                             timeout=max(self._heartbeat_s, 1.0))
        except grpc.aio.AioRpcError as e:
            self._report(from_rpc_error(e), "heartbeat")
            return
        for status in res.leases:
            if status.held and not status.cancel_requested:
                continue
            entry = self._running.get(status.lease_id)
            if entry is not None:
                self._abandon(entry, f"task cancelled ({status.cancel_reason})" if status.cancel_requested else "lease lost")

    def _report(self, error: BaseException, context: str) -> None:
        if self._on_error is not None:
            try:
                self._on_error(error, context)
            except Exception:  # noqa: BLE001 - a broken callback must not stop the worker
                log.exception("conveyor worker: on_error raised")
        else:
            log.warning("conveyor worker %s: %s: %s", self.worker_id, context, error)
