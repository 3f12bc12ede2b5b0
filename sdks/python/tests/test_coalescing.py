"""AsyncClient's coalesced enqueues against a real node, as the TS SDK's
test/integration/enqueue-coalescing.test.ts holds its Client: overlapping calls go out as
a few EnqueueBatch calls (the node's RPC counters say how many), and each caller gets what
a single Enqueue gives it: a bad item fails only its own caller, with the same error as
alone (``coalesce_enqueues=False``); a batch the node refuses as a whole (a scoped token
and one queue outside the scope) is sent again call by call, so only the out-of-scope
caller is refused."""
from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import NodeProcess
from conveyor import AsyncClient, Client, ConveyorError


def outcome(result: Any) -> Any:
    """A gathered result as comparable data: the TaskInfo's state, or the error's public fields."""
    if isinstance(result, ConveyorError):
        return {"code": result.code, "reason": result.reason, "message": result.message, "field": result.field,
                "details": result.details}
    if isinstance(result, BaseException):
        raise result
    return {"ok": result.state}


def calls(node: NodeProcess) -> dict[str, int]:
    counts = node.rpc_counts()
    return {"enqueue": counts.get("enqueue", 0), "batch": counts.get("enqueueBatch", 0)}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in before}


def test_concurrent_enqueues_with_one_invalid_item_fail_only_its_caller_in_one_batch(node: NodeProcess, queue: str) -> None:
    bad = 117

    async def main() -> tuple[list[Any], Any, dict[str, int]]:
        async with AsyncClient(node.address, timeout=10) as coalescing, \
                AsyncClient(node.address, timeout=10, coalesce_enqueues=False) as alone:
            before = calls(node)
            got = await asyncio.gather(
                *(coalescing.enqueue("t", {"i": i}, queue=queue, **({"priority": 42} if i == bad else {})) for i in range(200)),
                return_exceptions=True)
            after = calls(node)
            single = await asyncio.gather(alone.enqueue("t", {"i": bad}, queue=queue, priority=42), return_exceptions=True)
            return list(got), single[0], delta(before, after)

    got, single, counted = asyncio.run(main())
    assert [i for i, g in enumerate(got) if isinstance(g, BaseException)] == [bad]
    assert len({g.id for g in got if not isinstance(g, BaseException)}) == 199
    assert outcome(got[bad]) == outcome(single)
    assert outcome(single) | {"message": ""} == {"code": "INVALID_ARGUMENT", "reason": "INVALID_FIELD", "message": "",
                                                 "field": "task.priority", "details": {}}
    assert counted == {"enqueue": 0, "batch": 1}  # all 200 in one iteration: one batch, nothing alone


def test_the_node_sees_far_fewer_calls_than_enqueues_made(node: NodeProcess, queue: str, client: Client) -> None:
    """An open loop (one call per iteration, none awaited: a server whose requests each
    enqueue) and 50 callers awaiting each call: while two sends are in flight the others
    wait and go out together."""
    n = 2000

    async def main() -> tuple[list[Any], dict[str, int], list[Any], dict[str, int]]:
        async with AsyncClient(node.address, timeout=30) as ac:
            before = calls(node)
            pending = []
            for i in range(n):
                pending.append(asyncio.ensure_future(ac.enqueue("t", {"i": i}, queue=queue)))
                await asyncio.sleep(0)  # the load's shape (one call per iteration), not a wait for anything
            open_loop = await asyncio.gather(*pending)
            middle = calls(node)

            async def caller(k: int) -> list[Any]:
                return [await ac.enqueue("t", {"k": k, "j": j}, queue=queue) for j in range(40)]

            awaited = [info for infos in await asyncio.gather(*(caller(k) for k in range(50))) for info in infos]
            after = calls(node)
            return open_loop, delta(before, middle), awaited, delta(middle, after)

    open_loop, open_counted, awaited, awaited_counted = asyncio.run(main())
    assert len({info.id for info in open_loop}) == n and len({info.id for info in awaited}) == 2000
    assert sum(open_counted.values()) <= n // 10, open_counted  # measured: a few dozen calls
    assert sum(awaited_counted.values()) <= 2000 // 10, awaited_counted  # ~40 batches of 50
    assert client.get_task(open_loop[1234].id).json() == {"i": 1234}


def test_with_coalescing_off_every_call_is_its_own_enqueue(node: NodeProcess, queue: str) -> None:
    async def main() -> dict[str, int]:
        async with AsyncClient(node.address, timeout=10, coalesce_enqueues=False) as alone:
            before = calls(node)
            await asyncio.gather(*(alone.enqueue("t", {"i": i}, queue=queue) for i in range(20)))
            return delta(before, calls(node))

    assert asyncio.run(main()) == {"enqueue": 20, "batch": 0}


def test_a_full_batch_goes_out_at_batch_max(node: NodeProcess, queue: str) -> None:
    async def main() -> tuple[int, dict[str, int]]:
        async with AsyncClient(node.address, timeout=30) as ac:
            before = calls(node)
            infos = await asyncio.gather(*(ac.enqueue("t", None, queue=queue) for _ in range(1001)))
            return len({i.id for i in infos}), delta(before, calls(node))

    stored, counted = asyncio.run(main())
    assert stored == 1001 and counted == {"enqueue": 1, "batch": 1}  # 1,000 in a batch, the last alone


@pytest.fixture(scope="module")
def scoped_node() -> Iterator[tuple[NodeProcess, str]]:
    """A node with an auth file: a producer token scoped to queues ``mine-*``; /metrics public."""
    token = "cvy_" + secrets.token_urlsafe(32)
    folder = tempfile.mkdtemp(prefix="conveyor-pytest-auth-")
    auth = os.path.join(folder, "auth.yaml")
    with open(auth, "w") as f:
        f.write("tokens:\n"
                f"  - name: producer-scoped\n    sha256: {hashlib.sha256(token.encode()).hexdigest()}\n"
                "    roles: [producer]\n    queues: [\"mine-*\"]\n"
                "metrics_public: true\n")
    n = NodeProcess({"auth_file": auth})
    try:
        yield n, token
    finally:
        n.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_queue_outside_the_tokens_scope_refuses_only_its_caller(scoped_node: tuple[NodeProcess, str]) -> None:
    node, token = scoped_node

    async def main() -> tuple[list[Any], Any, dict[str, int]]:
        async with AsyncClient(node.address, timeout=10, token=token) as coalescing, \
                AsyncClient(node.address, timeout=10, token=token, coalesce_enqueues=False) as alone:
            before = calls(node)
            got = await asyncio.gather(
                *(coalescing.enqueue("t", {"i": i}, queue="theirs" if i == 4 else "mine-a") for i in range(10)),
                return_exceptions=True)
            after = calls(node)
            single = await asyncio.gather(alone.enqueue("t", {"i": 4}, queue="theirs"), return_exceptions=True)
            return list(got), single[0], delta(before, after)

    got, single, counted = asyncio.run(main())
    assert (outcome(single)["code"], outcome(single)["reason"]) == ("PERMISSION_DENIED", "QUEUE_NOT_IN_SCOPE")
    assert outcome(got[4]) == outcome(single)  # the error a lone Enqueue gives, naming Enqueue, not EnqueueBatch
    assert [outcome(g) for i, g in enumerate(got) if i != 4] == [{"ok": "pending"}] * 9
    assert counted == {"enqueue": 10, "batch": 1}  # refused as a whole, then each call alone


def test_a_token_out_of_scope_is_refused_by_the_sync_client_too(scoped_node: tuple[NodeProcess, str]) -> None:
    node, token = scoped_node
    with Client(node.address, timeout=10, token=token) as c:
        assert c.enqueue("t", None, queue="mine-b").state == "pending"
        with pytest.raises(ConveyorError) as err:
            c.enqueue("t", None, queue="theirs")
        assert (err.value.code, err.value.reason) == ("PERMISSION_DENIED", "QUEUE_NOT_IN_SCOPE")
    with Client(node.address, timeout=10, token="") as anonymous:
        with pytest.raises(ConveyorError) as err:
            anonymous.enqueue("t", None, queue="mine-b")
        assert err.value.code == "UNAUTHENTICATED"
