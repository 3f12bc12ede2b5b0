"""Which of a worker's lease loops polls which queue (pure: no I/O, the clock passed in).
The same rules as the TypeScript SDK's src/sdk/queue-placement.ts.

Every queue starts on the main loop, the one on the worker's configured address. A Lease
answer's ``routes`` name the node holding each queue the answering node does not hold;
those queues move to a loop on that node's address, so each owner's long poll parks on
its own queues. A loop that cannot use its node (unreachable, or the node says it is not
the owner) hands its queues back to the main loop, which learns their routes again;
routes to that address are then ignored for a cool-down that doubles with each hand-back
(up to ROUTE_COOLDOWN_MAX_S), so an owner the worker cannot reach (but its node can) does
not make the queues bounce between loops in a tight cycle.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

#: The main loop's key: the worker's configured address, whatever the nodes advertise.
MAIN = ""

ROUTE_COOLDOWN_FIRST_S = 1.0
ROUTE_COOLDOWN_MAX_S = 30.0


class RouteLike(Protocol):
    queue: str
    address: str


class QueuePlacement:
    def __init__(self, queues: Sequence[tuple[str, int]], main_address: str) -> None:
        """`queues`: (name, weight) in the worker's order. Routes naming `main_address` (as
        some node advertises it) keep their queues on the main loop."""
        self._queues = list(queues)
        self._main_address = main_address
        self._at: dict[str, str] = {q: MAIN for q, _ in self._queues}
        #: address → (cooling down until, hand-backs so far)
        self._cooling: dict[str, tuple[float, int]] = {}

    def queues_of(self, key: str) -> list[tuple[str, int]]:
        """The queues the loop at `key` polls (MAIN for the main loop), in the worker's order."""
        return [(q, w) for q, w in self._queues if self._at.get(q) == key]

    def addresses(self) -> list[str]:
        """Addresses other than the main one that have queues to poll."""
        return sorted({a for a in self._at.values() if a != MAIN})

    def route(self, from_: str, routes: Iterable[RouteLike], now: float) -> bool:
        """Applies the routes of an answer from the loop at `from_`. Only queues that loop
        polls move (a late answer cannot undo a newer move). Returns whether anything moved."""
        moved = False
        for r in routes:
            if not r.address or self._at.get(r.queue) != from_ or self._cooling_down(r.address, now):
                continue
            to = MAIN if r.address == self._main_address else r.address
            if to == from_:
                continue
            self._at[r.queue] = to
            moved = True
        return moved

    def hand_back(self, from_: str, now: float) -> None:
        """The loop at `from_` cannot serve its queues: back to the main loop, and `from_` cools down."""
        if from_ == MAIN:
            return
        for q, at in self._at.items():
            if at == from_:
                self._at[q] = MAIN
        count = self._cooling.get(from_, (0.0, 0))[1] + 1
        self._cooling[from_] = (now + min(ROUTE_COOLDOWN_MAX_S, ROUTE_COOLDOWN_FIRST_S * 2 ** (count - 1)), count)

    def reached(self, address: str) -> None:
        """A Lease call to `address` was answered: its cool-down, if any, starts over."""
        self._cooling.pop(address, None)

    def any_cooling_down(self, now: float) -> bool:
        """Whether routes to some address are being ignored now. Loops then let their node
        park as it sees fit (no ``poll_owners``): answers at once would carry routes nobody follows."""
        return any(self._cooling_down(a, now) for a in self._cooling)

    def _cooling_down(self, address: str, now: float) -> bool:
        c = self._cooling.get(address)
        return c is not None and now < c[0]
