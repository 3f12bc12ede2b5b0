"""A worker's lease loops, one per node that holds some of its queues, so that in a
cluster a worker parks on every owner and picks up a task wherever it arrives (issue 13);
the same design as the TypeScript SDK's src/sdk/lease-loops.ts and lease-loop.ts.

- The worker starts with one loop, on its configured address, for all its queues. Its
  Lease calls say ``poll_owners``: a node holding only some of the queues answers at once
  with ``routes`` (owner and address of the others), and those queues move to a loop on
  that node's address (_placement.py), over a channel of its own. On a single node no
  answer carries routes: one loop, no other channel, every call as before.
- The loops share one budget of ``concurrency`` slots (_slots.py).
- A loop whose node is unreachable or does not hold its queues gives them back to the main
  loop, which learns their routes again.
- An answer marked ``relocated`` (the node began handing some of the queues off) is
  followed by the next call at once: the node holds it until the move ends, then answers
  with the new owner in ``routes``, and that owner's loop polls at once.
- Heartbeats and settles stay on the main channel (the node forwards each part to its
  owner). On stop, every other node polled is fenced with its own draining Settle: a
  node's drain fence is per node.

- Queues that join a loop whose call is parked (a move to a node it already polls, a
  hand-back to a parked main loop) are polled at once by a *top-up*: one more Lease on the
  same node for just those queues, with a slot of its own. The parked call is not
  cancelled for it, since the node might hand it deliveries as it ends; the loop's next
  call names every queue again.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Optional

import grpc
import grpc.aio

from ._channel import aio_channel
from ._placement import MAIN, QueuePlacement
from ._slots import SlotBudget, lease_share
from ._status import from_rpc_error
from .errors import ConveyorError
from .v1 import worker_service_pb2 as wpb, worker_service_pb2_grpc

log = logging.getLogger("conveyor.worker")

BATCH_MAX = 1000
#: How long a Lease call may still be in flight after its wait (src/base/lease-timing.ts).
LEASE_CALL_IN_FLIGHT_MARGIN_S = 15.0
RECONNECT_BASE_S = 0.1
RECONNECT_MAX_S = 1.0
#: Why a loop on another node gives its queues back: the node cannot serve them for us.
HAND_BACK_REASONS = frozenset({"UNREACHABLE", "WRONG_OWNER", "OWNER_DOWN", "NO_ACTIVE_MEMBER"})
FENCE_TIMEOUT_S = 10.0


def _jitter(s: float) -> float:
    return s / 2 + random.random() * (s / 2)


def _retry_pause(failures: int) -> float:
    return _jitter(min(RECONNECT_MAX_S, RECONNECT_BASE_S * 2 ** min(failures, 10)))


class LeaseLoop:
    """One long-poll loop against one node: reserve free slots, one Lease call for the
    queues this loop polls, hand the answer on, repeat. The main loop (the configured node)
    waits for its node as long as it takes (``wait_for_ready``) and retries whatever fails;
    a loop on another node fails fast and gives its queues back instead."""

    def __init__(self, loops: "LeaseLoops", address: str, stub: Any, main: bool) -> None:
        self.address = address
        self.main = main
        self.key = MAIN if main else address
        #: Whether a Lease call is out now.
        self.parked = False
        self.last_answer_empty = False
        #: Whether any Lease call was made (a node never called has nothing to fence on stop).
        self.ever_leased = False
        #: Set the moment `run` returns (a loop that ended takes no more queues).
        self.ended = False
        self._loops = loops
        self._stub = stub
        self._call: Optional[Any] = None
        self._wake = asyncio.Event()
        #: The queues the parked call names (None while no call is out).
        self._calling: Optional[set[str]] = None
        self._top_up: Optional[asyncio.Task[None]] = None
        self._top_up_call: Optional[Any] = None

    def wake(self) -> None:
        """The main loop with no queues (all moved to their owners): some came back."""
        self._wake.set()

    def cancel(self) -> None:
        """The worker stops: the Lease calls out now are cancelled, every wait ends."""
        for call in (self._call, self._top_up_call):
            if call is not None:
                call.cancel()
        self._wake.set()

    def joined(self) -> None:
        """Queues may have joined this loop: if its call is parked without some of them, poll
        those now with a top-up call. One top-up at a time; when it ends while the call is
        still parked, the queues it polled get the next one."""
        if self._calling is None or self._top_up is not None or self.ended or self._loops.stopping:
            return
        if not self._missing():
            return
        self._top_up = asyncio.ensure_future(self._run_top_up())

        def done(_task: asyncio.Task[None]) -> None:
            self._top_up = None
            self.joined()

        self._top_up.add_done_callback(done)

    async def top_up_done(self) -> None:
        """Waits for the top-up call out now, if any (the worker stops)."""
        if self._top_up is not None:
            await asyncio.gather(self._top_up, return_exceptions=True)

    def _missing(self) -> list[tuple[str, int]]:
        calling = self._calling
        return [] if calling is None else [(q, w) for q, w in self._loops.placement.queues_of(self.key) if q not in calling]

    async def _run_top_up(self) -> None:
        loops = self._loops
        reserved = await loops.slots.reserve(lambda free: 1)
        if reserved == 0:
            return
        try:
            # Re-read after the reservation (it may have waited): the parked call may be over.
            queues = self._missing()
            if not queues or loops.stopping:
                return
            self._top_up_call = self._stub.Lease(loops.request_for(queues, reserved),
                                                 timeout=loops.lease_wait_ms / 1000 + LEASE_CALL_IN_FLIGHT_MARGIN_S,
                                                 wait_for_ready=self.main)
            res = await self._top_up_call
            # Deliveries take their slots (as running) before the reservation is given back.
            loops.answered(self, res)
        except asyncio.CancelledError:
            if not loops.stopping:
                raise
        except grpc.aio.AioRpcError as e:
            # The loop's own call meets the same node and handles what is wrong with it
            # (and a loop that ended, its queues gone, closes the channel under it).
            if not loops.stopping and not self.ended:
                loops.report(from_rpc_error(e), "lease")
        finally:
            self._top_up_call = None
            loops.slots.release(reserved)

    async def run(self) -> None:
        try:
            await self._poll()
        finally:
            self.ended = True
            if self._loops.stopping:
                await self.top_up_done()

    async def _poll(self) -> None:
        loops = self._loops
        failures = 0
        while not loops.stopping:
            queues = loops.placement.queues_of(self.key)
            if not queues:
                if not self.main:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            slots = await loops.slots.reserve(lambda free: min(BATCH_MAX, loops.share(self, free)))
            if slots == 0:
                break
            # The reservation may have waited: a stop that came meanwhile must not start a long poll.
            if loops.stopping:
                loops.slots.release(slots)
                break
            called_at = time.monotonic()
            try:
                res = await self._lease(slots)
            except asyncio.CancelledError:
                loops.slots.release(slots)
                if loops.stopping:
                    break
                raise
            except grpc.aio.AioRpcError as e:
                loops.slots.release(slots)
                if loops.stopping:
                    break
                error = from_rpc_error(e)
                if not self.main and error.reason in HAND_BACK_REASONS:
                    loops.hand_back(self, error)
                    return
                loops.report(error, "lease")
                failures += 1
                await loops.pause(_retry_pause(failures))
                continue
            failures = 0
            # Deliveries take their slots (as running) before the reservation is given back.
            loops.answered(self, res)
            loops.slots.release(slots)
            if res.deliveries:
                # Let handlers that finish at once free their slots first, so the next Lease
                # asks for every free slot (fewer, fuller round trips).
                await asyncio.sleep(0)
            elif res.relocated:
                log.info("conveyor worker %s: a partition of queues %s is moving off the node at %s; polling again for its new owner",
                         loops.worker_id, ", ".join(q for q, _ in queues), self.address)
            elif time.monotonic() - called_at < 0.05 and not res.routes:
                # An empty answer at once means no wait was possible (a zero lease_wait, or the
                # node still fences a previous run of this worker id): back off, do not spin.
                # (An answer carrying routes came at once on purpose: the queues move now.)
                await loops.pause(_jitter(RECONNECT_BASE_S))

    async def _lease(self, slots: int) -> wpb.LeaseResponse:
        loops = self._loops
        self.ever_leased = True
        self.parked = True
        try:
            request = loops.request(self.key, slots)
            self._calling = {q.queue for q in request.queues}
            self._call = self._stub.Lease(request, timeout=loops.lease_wait_ms / 1000 + LEASE_CALL_IN_FLIGHT_MARGIN_S,
                                          # Only the main loop waits for its node: another that cannot be reached gives its queues back.
                                          wait_for_ready=self.main)
            res: wpb.LeaseResponse = await self._call
            self.last_answer_empty = not res.deliveries
            return res
        finally:
            self._call = None
            self._calling = None
            self.parked = False


class _OtherNode:
    __slots__ = ("loop", "channel", "stub", "task")

    def __init__(self, loop: LeaseLoop, channel: grpc.aio.Channel, stub: Any) -> None:
        self.loop = loop
        self.channel = channel
        self.stub = stub
        self.task: Optional[asyncio.Task[None]] = None


class LeaseLoops:
    """The worker's loops: the main one on its configured node, one per other owner."""

    def __init__(self, *, worker_id: str, queues: list[tuple[str, int]], concurrency: int, lease_wait_ms: int,
                 main_address: str, main_stub: Any, base: Callable[[], dict[str, Any]], running: Callable[[], int],
                 deliver: Callable[[wpb.LeaseResponse], None], report: Callable[[BaseException, str], None],
                 connect: Callable[[str], grpc.aio.Channel] = aio_channel) -> None:
        self.worker_id = worker_id
        #: Opens the channel to another node (the worker's token and TLS, as on its main channel).
        self._connect = connect
        self.lease_wait_ms = lease_wait_ms
        self.slots = SlotBudget(concurrency, running)
        self.placement = QueuePlacement(queues, main_address)
        self.stopping = False
        self._main_address = main_address
        self._base = base
        self._deliver = deliver
        self._report = report
        self._stopped = asyncio.Event()
        self._closing: set[asyncio.Task[None]] = set()
        self._main = LeaseLoop(self, main_address, main_stub, True)
        self._others: dict[str, _OtherNode] = {}

    @property
    def nodes(self) -> list[str]:
        """Addresses of the other nodes polled now."""
        return list(self._others)

    async def run(self) -> None:
        """Leases until `stop`; returns once every loop has ended."""
        await self._main.run()
        tasks = [o.task for o in self._others.values() if o.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        """No more Lease calls: cancels the ones out, ends every wait."""
        self.stopping = True
        self._stopped.set()
        self.slots.close()
        self._main.cancel()
        for o in self._others.values():
            o.loop.cancel()

    async def fence(self) -> None:
        """The draining Settle (no items) to every other node polled: see the module doc."""
        async def one(o: _OtherNode) -> None:
            try:
                await o.stub.Settle(wpb.SettleRequest(worker_id=self.worker_id, worker_draining=True), timeout=FENCE_TIMEOUT_S)
            except grpc.aio.AioRpcError as e:
                self._report(from_rpc_error(e), "settle")
        await asyncio.gather(*(one(o) for o in self._others.values() if o.loop.ever_leased))

    async def close(self) -> None:
        """Closes the channels to other nodes (the main one is the worker's)."""
        others, self._others = list(self._others.values()), {}
        await asyncio.gather(*(o.channel.close() for o in others), *self._closing, return_exceptions=True)

    async def pause(self, seconds: float) -> None:
        """Waits `seconds`, or less if the worker stops meanwhile."""
        try:
            await asyncio.wait_for(self._stopped.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    def report(self, error: BaseException, context: str) -> None:
        self._report(error, context)

    def request(self, key: str, slots: int) -> wpb.LeaseRequest:
        return self.request_for(self.placement.queues_of(key), slots)

    def request_for(self, queues: list[tuple[str, int]], slots: int) -> wpb.LeaseRequest:
        return wpb.LeaseRequest(queues=[wpb.QueueWeight(queue=q, weight=w) for q, w in queues], max_deliveries=slots, wait_ms=self.lease_wait_ms,
                                poll_owners=not self.placement.any_cooling_down(time.monotonic()), **self._base())

    def share(self, loop: LeaseLoop, free: int) -> int:
        active = [l for l in [self._main, *(o.loop for o in self._others.values())]
                  if not l.ended and self.placement.queues_of(l.key)]
        return lease_share(free, len(active), sum(1 for l in active if not l.parked), loop.last_answer_empty)

    def answered(self, loop: LeaseLoop, res: wpb.LeaseResponse) -> None:
        if not loop.main:
            self.placement.reached(loop.key)
        self._deliver(res)
        if res.routes and self.placement.route(loop.key, res.routes, time.monotonic()):
            self._start_loops()
            self._main.wake()  # a route may name the main node (its queues come back to it)
            for l in [self._main, *(o.loop for o in self._others.values())]:
                l.joined()  # loops already parked poll their new queues now

    def hand_back(self, loop: LeaseLoop, error: ConveyorError) -> None:
        queues = ", ".join(q for q, _ in self.placement.queues_of(loop.key))
        self._report(error, "lease")
        log.warning("conveyor worker %s: the node at %s cannot serve queues %s (%s); polling them through %s again",
                    self.worker_id, loop.address, queues, error, self._main_address)
        self.placement.hand_back(loop.key, time.monotonic())
        self._main.wake()
        self._main.joined()

    def _start_loops(self) -> None:
        """A loop on every address that has queues and none running."""
        if self.stopping:
            return
        for address in self.placement.addresses():
            existing = self._others.get(address)
            if existing is not None and not existing.loop.ended:
                continue
            if existing is not None:
                self._close_later(existing.channel)
            channel = self._connect(address)
            stub = worker_service_pb2_grpc.WorkerServiceStub(channel)
            other = _OtherNode(LeaseLoop(self, address, stub, False), channel, stub)
            self._others[address] = other
            log.info("conveyor worker %s: polling the node at %s for queues %s (their owner)",
                     self.worker_id, address, ", ".join(q for q, _ in self.placement.queues_of(address)))
            other.task = asyncio.ensure_future(other.loop.run())
            other.task.add_done_callback(lambda _t, address=address, other=other: self._loop_ended(address, other))

    def _loop_ended(self, address: str, other: _OtherNode) -> None:
        # Ended without the worker stopping (its queues left): nothing to fence there later.
        if self.stopping or self._others.get(address) is not other:
            return
        del self._others[address]
        self._close_later(other.channel)

    def _close_later(self, channel: grpc.aio.Channel) -> None:
        task = asyncio.ensure_future(channel.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
