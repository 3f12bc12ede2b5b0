"""A worker's one budget of ``concurrency`` slots, shared by its lease loops (one per node
it polls); the same rules as the TypeScript SDK's src/sdk/slot-budget.ts. A Lease call may
be answered with as many deliveries as it asked for, so a loop reserves the slots it asks
for before calling and gives back what the answer did not fill: running deliveries plus
reserved slots never exceed the concurrency, however many loops are parked at once.

Loops waiting for a slot are served first come, first served, so that with fewer slots
than nodes a loop whose node keeps answering cannot starve the others.
"""
from __future__ import annotations

import asyncio
import math
from collections.abc import Callable


class SlotBudget:
    def __init__(self, total: int, running: Callable[[], int]) -> None:
        """`running()`: deliveries being handled now (each holds one slot)."""
        self.total = total
        self._running = running
        self._reserved = 0
        self._waiting: list[asyncio.Event] = []
        self._closed = False

    @property
    def free(self) -> int:
        return self.total - self._running() - self._reserved

    async def reserve(self, share: Callable[[int], int]) -> int:
        """Waits for a free slot (behind loops already waiting), then reserves ``share(free)``
        of the free slots (at least one). Returns 0 once the budget is closed (the worker stops)."""
        me: asyncio.Event | None = None
        try:
            while not self._closed:
                free = self.free
                if free > 0 and (not self._waiting or self._waiting[0] is me):
                    if me is not None:
                        self._waiting.pop(0)
                        me = None
                    slots = min(free, max(1, share(free)))
                    self._reserved += slots
                    self._wake_next()
                    return slots
                if me is None:
                    me = asyncio.Event()
                    self._waiting.append(me)
                me.clear()
                await me.wait()
            return 0
        finally:
            if me is not None:
                self._waiting.remove(me)
                self._wake_next()

    def release(self, slots: int) -> None:
        """A Lease answer came: its deliveries run (they count in `running`), the unused reservation is free again."""
        self._reserved -= slots
        self._wake_next()

    def freed(self) -> None:
        """A running delivery ended (or was abandoned): its slot is free."""
        self._wake_next()

    def close(self) -> None:
        """The worker stops: every waiting reservation returns 0."""
        self._closed = True
        for w in self._waiting:
            w.set()

    def _wake_next(self) -> None:
        if self.free > 0 and self._waiting:
            self._waiting[0].set()


def lease_share(free: int, loops: int, not_parked: int, last_answer_empty: bool) -> int:
    """How many of `free` slots a loop asks for. One loop (a single node, or every queue on
    one owner) asks for all of them. With several, a loop whose last answer was empty parks
    with one slot (enough to be woken by the next task on its node; it asks for more as
    soon as that answer comes), and a busy one takes an equal share with the loops not
    parked now, so slots follow the work instead of sitting in idle long polls."""
    if loops <= 1:
        return free
    if last_answer_empty:
        return 1
    return math.ceil(free / max(1, not_parked))
