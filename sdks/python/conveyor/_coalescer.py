"""Coalesces an AsyncClient's overlapping ``enqueue`` calls into EnqueueBatch calls: the
TypeScript SDK's src/sdk/enqueue-coalescer.ts on asyncio, rule for rule.

Why: a gRPC unary call costs ~0.3-0.5 ms of CPU on each side however small it is, so a
producer with many calls in flight is bound by calls, not tasks
(docs/decisions/0009-coalesced-enqueues.md). One batch of N costs about one call.

When a call goes out (Nagle-like, never a timer):

- fewer than `in_flight_max` sends in flight: at the end of the event-loop iteration
  (``loop.call_soon``), with every call of that iteration. A lone call goes out as a plain
  Enqueue, so latency at one call in flight is what it was without coalescing;
- `in_flight_max` sends in flight: calls wait for one to return, then go out together in
  the next iteration; a pending group that reaches a bound (`count_max` items, or
  `bytes_max` estimated bytes) goes out without waiting.

What each caller gets is what a single Enqueue would have given it:

- per-item outcomes of the batch go to their own callers (an invalid item fails only its
  caller);
- a whole-call refusal made before any work (`refused_before_work`: the guard's scope
  check, the size checks) says nothing about one item, so every member is sent again
  alone, each getting its own answer. This is safe: the node stored nothing;
- any other whole-call failure (unreachable, the node stopping, INTERNAL) fails every
  member with it: as with a single Enqueue, whether anything was stored is not known, so
  sending again could store a task twice (a retry is the caller's, idempotent with its
  own ``task_id``).

One client has one group (its calls share its deadline and token; every enqueue option is
a TaskSpec field, which a batch carries per item). Order is kept: a batch lists its calls
in call order, and a partial batch goes out only after the earlier ones did. A caller
cancelled before its call went out is dropped from it (nothing was sent for it); once
sent, its task may be stored whatever happens to the caller.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Optional, TypeVar, Union

from .errors import ConveyorError

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Pending(Generic[Item, Result]):
    __slots__ = ("item", "size", "future")

    def __init__(self, item: Item, size: int, future: "asyncio.Future[Result]") -> None:
        self.item = item
        self.size = size
        self.future = future


class EnqueueCoalescer(Generic[Item, Result]):
    """Sends each added item with the other calls that overlap it. `one` sends an item
    alone; `batch` sends several and answers one outcome per item, in order (a result, or
    that item's error); `refused_before_work` tells a whole-batch error that stored nothing.
    Bound to the event loop of its first call."""

    def __init__(
        self,
        one: Callable[[Item], Awaitable[Result]],
        batch: Callable[[Sequence[Item]], Awaitable[Sequence[Union[Result, BaseException]]]],
        refused_before_work: Callable[[BaseException], bool],
        *,
        count_max: int,
        bytes_max: int,
        bytes_of: Callable[[Item], int],
        in_flight_max: int,
    ) -> None:
        self._one = one
        self._batch = batch
        self._refused_before_work = refused_before_work
        self._count_max = count_max
        self._bytes_max = bytes_max
        self._bytes_of = bytes_of
        self._in_flight_max = in_flight_max
        self._pending: list[_Pending[Item, Result]] = []
        self._pending_bytes = 0
        self._in_flight = 0
        self._flush_scheduled = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        #: The sends' tasks, so that `drain` can wait for them (and they are not collected).
        self._sends: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """Sends in flight now."""
        return self._in_flight

    def add(self, item: Item) -> "asyncio.Future[Result]":
        """Queues `item`; the future ends with its own outcome."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        future: asyncio.Future[Result] = loop.create_future()
        size = self._bytes_of(item)
        self._pending.append(_Pending(item, size, future))
        self._pending_bytes += size
        if self._in_flight < self._in_flight_max or self._full():
            self._schedule()
        return future

    async def drain(self) -> None:
        """Returns once every call added so far has been answered (sends, resends included)."""
        while self._pending or self._sends:
            if self._sends:
                await asyncio.wait(list(self._sends))
            else:  # a flush is scheduled for this iteration's end: let it run
                await asyncio.sleep(0)

    def _full(self) -> bool:
        return len(self._pending) >= self._count_max or self._pending_bytes >= self._bytes_max

    def _schedule(self) -> None:
        if self._flush_scheduled or self._loop is None:
            return
        self._flush_scheduled = True
        self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Sends what is pending: all of it (in chunks within the bounds) when fewer than
        in_flight_max sends were in flight, otherwise only full chunks."""
        self._flush_scheduled = False
        self._drop_cancelled()
        idle = self._in_flight < self._in_flight_max
        while True:
            chunk = self._take_chunk()
            if not chunk:
                break
            # A chunk is full when it reached the count bound or the bytes bound (calls remain).
            full = len(chunk) >= self._count_max or bool(self._pending)
            if not idle and not full:
                # A partial batch waits for a send in flight (put back, in order).
                self._pending[:0] = chunk
                self._pending_bytes += sum(p.size for p in chunk)
                break
            self._send(chunk)

    def _drop_cancelled(self) -> None:
        if any(p.future.done() for p in self._pending):
            self._pending = [p for p in self._pending if not p.future.done()]
            self._pending_bytes = sum(p.size for p in self._pending)

    def _take_chunk(self) -> list[_Pending[Item, Result]]:
        """The longest prefix of the pending calls within the bounds (a larger single call
        goes alone: the node judges it)."""
        n = 0
        size = 0
        for p in self._pending:
            if n > 0 and (n >= self._count_max or size + p.size > self._bytes_max):
                break
            n += 1
            size += p.size
        chunk, self._pending = self._pending[:n], self._pending[n:]
        self._pending_bytes -= size
        return chunk

    def _send(self, chunk: list[_Pending[Item, Result]]) -> None:
        self._in_flight += 1
        task = asyncio.ensure_future(self._run(chunk))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    def _returned(self) -> None:
        """A send came back. It counts as returned before its callers are told, so a caller
        that enqueues again on its answer finds a send fewer in flight (no added latency)."""
        self._in_flight -= 1
        if self._pending:
            self._schedule()

    async def _run(self, chunk: list[_Pending[Item, Result]]) -> None:
        if len(chunk) == 1:
            p = chunk[0]
            try:
                result = await self._one(p.item)
            except asyncio.CancelledError:
                self._returned()
                _cancel(p)
                raise
            except BaseException as error:  # noqa: BLE001 - handed to its caller
                self._returned()
                _fail(p, error)
                return
            self._returned()
            _succeed(p, result)
            return
        try:
            outcomes = await self._batch([p.item for p in chunk])
        except asyncio.CancelledError:
            self._returned()
            for p in chunk:
                _cancel(p)
            raise
        except BaseException as error:  # noqa: BLE001 - handed to the callers
            if self._refused_before_work(error):
                # Refused as a whole, nothing stored: each call alone gets its own answer.
                for p in chunk:
                    if not p.future.done():
                        self._send([p])
            else:
                for p in chunk:
                    _fail(p, _copy(error))
            self._returned()
            return
        self._returned()
        for i, p in enumerate(chunk):
            if i >= len(outcomes):
                _fail(p, ConveyorError("INTERNAL", "INTERNAL",
                                       f"the batch answer has {len(outcomes)} items for {len(chunk)} tasks"))
                continue
            outcome = outcomes[i]
            if isinstance(outcome, BaseException):
                _fail(p, outcome)
            else:
                _succeed(p, outcome)


def _succeed(p: _Pending[Item, Result], result: Result) -> None:
    if not p.future.done():
        p.future.set_result(result)


def _fail(p: _Pending[Item, Result], error: BaseException) -> None:
    if not p.future.done():
        p.future.set_exception(error)


def _copy(error: BaseException) -> BaseException:
    """Each caller raises its own ConveyorError (one instance raised in many tasks would
    gather all their tracebacks)."""
    if isinstance(error, ConveyorError):
        return ConveyorError(error.code, error.reason, error.message, error.field, error.details)
    return error


def _cancel(p: _Pending[Item, Result]) -> None:
    if not p.future.done():
        p.future.cancel()
