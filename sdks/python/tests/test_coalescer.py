"""The enqueue coalescer without a node: when calls go out (one iteration's calls together,
two sends in flight, the count and bytes bounds), and what each caller gets (its own
outcome; a whole-batch refusal resent call by call; any other whole failure fails all).
The fake transport's sends wait on futures the test resolves, so every step is decided
by the test, never by time."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Union

import pytest

from conveyor import ConveyorError
from conveyor._coalescer import EnqueueCoalescer


class Transport:
    """Records each send (("one", [item]) or ("batch", items)); a send returns when the test
    answers it (`answer`), or at once when `auto` is set."""

    def __init__(self, auto: bool = False) -> None:
        self.auto = auto
        self.sends: list[tuple[str, list[str]]] = []
        self.replies: list[asyncio.Future[object]] = []
        self.sent = asyncio.Event()

    async def _reply(self, kind: str, items: list[str]) -> object:
        self.sends.append((kind, items))
        self.sent.set()
        if self.auto:
            return None
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.replies.append(reply)
        return await reply

    async def one(self, item: str) -> str:
        reply = await self._reply("one", [item])
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, dict):
            reply = reply.get(item)
            if isinstance(reply, BaseException):
                raise reply
        return f"ok:{item}"

    async def batch(self, items: Sequence[str]) -> list[Union[str, BaseException]]:
        reply = await self._reply("batch", list(items))
        if isinstance(reply, BaseException):
            raise reply
        per_item = reply if isinstance(reply, dict) else {}
        return [per_item.get(i, f"ok:{i}") for i in items]  # type: ignore[misc]

    def answer(self, index: int, reply: object = None) -> None:
        self.replies[index].set_result(reply)

    async def wait_sends(self, n: int) -> None:
        while len(self.sends) < n:
            self.sent.clear()
            await self.sent.wait()


def refused(error: BaseException) -> bool:
    return isinstance(error, ConveyorError) and error.code in ("INVALID_ARGUMENT", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED")


def coalescer(t: Transport, count_max: int = 1000, bytes_max: int = 1 << 20) -> EnqueueCoalescer[str, str]:
    return EnqueueCoalescer(t.one, t.batch, refused, count_max=count_max, bytes_max=bytes_max, bytes_of=len, in_flight_max=2)


def test_a_lone_call_is_a_single_send_and_one_iterations_calls_are_one_batch() -> None:
    async def main() -> None:
        t = Transport(auto=True)
        c = coalescer(t)
        assert await c.add("a") == "ok:a"
        assert await asyncio.gather(*(c.add(x) for x in "bcd")) == ["ok:b", "ok:c", "ok:d"]
        assert t.sends == [("one", ["a"]), ("batch", ["b", "c", "d"])]

    asyncio.run(main())


def test_with_two_sends_in_flight_later_calls_wait_and_go_out_together() -> None:
    async def main() -> None:
        t = Transport()
        c = coalescer(t)
        first = c.add("a")
        await t.wait_sends(1)
        second = c.add("b")
        await t.wait_sends(2)
        assert c.in_flight == 2
        later = [c.add(x) for x in "cdef"]
        await asyncio.sleep(0)  # an iteration passes (not synchronisation: nothing may be sent)
        await asyncio.sleep(0)
        assert len(t.sends) == 2
        t.answer(0)
        assert await first == "ok:a"
        await t.wait_sends(3)
        assert t.sends[2] == ("batch", ["c", "d", "e", "f"])
        t.answer(1)
        t.answer(2)
        assert await second == "ok:b" and await asyncio.gather(*later) == ["ok:c", "ok:d", "ok:e", "ok:f"]

    asyncio.run(main())


def test_a_pending_batch_that_reaches_a_bound_goes_out_without_waiting() -> None:
    async def main() -> None:
        t = Transport()
        c = coalescer(t, count_max=3, bytes_max=10)
        c.add("a")
        await t.wait_sends(1)
        c.add("b")
        await t.wait_sends(2)
        waiting = [c.add(x) for x in ("c", "d")]  # partial: waits
        full = [c.add("e")]  # three pending: a full batch
        await t.wait_sends(3)
        assert t.sends[2] == ("batch", ["c", "d", "e"])
        big = [c.add("x" * 6), c.add("y" * 6)]  # 12 bytes > 10: the first goes as a full chunk
        await t.wait_sends(4)
        assert t.sends[3] == ("one", ["x" * 6])
        assert len(t.sends) == 4  # "yyyyyy" waits, alone and partial, for a send to return
        for i in range(4):
            t.answer(i)
        await t.wait_sends(5)
        assert t.sends[4] == ("one", ["y" * 6])
        t.answer(4)
        assert len(await asyncio.gather(*waiting, *full, *big)) == 5

    asyncio.run(main())


def test_a_whole_batch_refusal_is_resent_call_by_call() -> None:
    async def main() -> None:
        t = Transport()
        c = coalescer(t)
        calls = [c.add(x) for x in ("ok1", "bad", "ok2")]
        await t.wait_sends(1)
        denied = ConveyorError("PERMISSION_DENIED", "QUEUE_NOT_IN_SCOPE", "not yours")
        t.answer(0, denied)
        await t.wait_sends(4)
        assert t.sends[1:] == [("one", ["ok1"]), ("one", ["bad"]), ("one", ["ok2"])]
        alone = ConveyorError("PERMISSION_DENIED", "QUEUE_NOT_IN_SCOPE", "bad alone")
        for i in (1, 2, 3):
            t.answer(i, {"bad": alone})
        got = await asyncio.gather(*calls, return_exceptions=True)
        assert got[0] == "ok:ok1" and got[2] == "ok:ok2" and got[1] is alone

    asyncio.run(main())


@pytest.mark.parametrize("code", ["UNAVAILABLE", "INTERNAL"])
def test_any_other_whole_batch_failure_fails_every_call_and_is_not_resent(code: str) -> None:
    async def main() -> None:
        t = Transport()
        c = coalescer(t)
        calls = [c.add(x) for x in "abc"]
        await t.wait_sends(1)
        t.answer(0, ConveyorError(code, "UNREACHABLE", "gone"))
        got = await asyncio.gather(*calls, return_exceptions=True)
        assert [(e.code, e.message) for e in got] == [(code, "gone")] * 3  # type: ignore[union-attr]
        assert len({id(e) for e in got}) == 3  # each caller raises its own
        await c.drain()
        assert len(t.sends) == 1

    asyncio.run(main())


def test_an_item_error_fails_only_its_caller_and_a_cancelled_caller_is_not_sent() -> None:
    async def main() -> None:
        t = Transport()
        c = coalescer(t)
        calls = [c.add(x) for x in "abc"]
        calls[2].cancel()  # before the iteration ends: never sent
        await t.wait_sends(1)
        assert t.sends == [("batch", ["a", "b"])]
        t.answer(0, {"b": ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD", "task.priority: 0", "task.priority")})
        a, b = await asyncio.gather(*calls[:2], return_exceptions=True)
        assert a == "ok:a" and isinstance(b, ConveyorError) and b.field == "task.priority"

    asyncio.run(main())
