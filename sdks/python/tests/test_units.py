"""Pieces of the SDK without a node: encoding, durations, the mux, attempt ends, truncation,
the lease loops' queue placement and slot budget."""
from __future__ import annotations

import asyncio
import json
import random
from datetime import datetime, timedelta, timezone

import pytest

from conveyor import ConcurrencyRule, Mux, NewTask, SkipRetry, Worker, encode_json, is_skip_retry, skip_retry
from conveyor.mux import encode_result, wants_context
from conveyor.task import state_name, to_spec
from conveyor.v1 import task_pb2, worker_service_pb2
from conveyor._placement import MAIN, ROUTE_COOLDOWN_MAX_S, QueuePlacement
from conveyor._slots import SlotBudget, lease_share
from conveyor.worker import _truncate, attempt_end


def test_json_payloads_are_written_as_json_stringify_writes_them() -> None:
    assert encode_json({"a": [1, 2.5, None, True], "s": "é✓"}) == '{"a":[1,2.5,null,true],"s":"é✓"}'.encode()
    with pytest.raises(ValueError):
        encode_json(float("nan"))  # JSON.stringify would write null; refuse rather than differ


def test_spec_encoding_of_payloads_durations_and_optionals() -> None:
    spec = to_spec(NewTask("t", b"\x01", timeout=timedelta(seconds=1.5), process_in=2, retention=0, max_retry=0))
    assert (spec.payload, spec.content_type, spec.timeout_ms, spec.process_in_ms) == (b"\x01", "application/octet-stream", 1500, 2000)
    assert spec.HasField("retention_ms") and spec.HasField("max_retry") and not spec.HasField("priority")
    at = datetime(2030, 1, 2, tzinfo=timezone.utc)
    assert to_spec(NewTask("t", {"x": 1}, process_at=at)).process_at_ms == int(at.timestamp() * 1000)
    assert to_spec(NewTask("t")).content_type == "application/octet-stream"
    assert to_spec(NewTask("t", "text", content_type="text/plain")).payload == b'"text"'


def test_state_names_are_lowercase_and_unknown_is_not_guessed() -> None:
    assert state_name(task_pb2.TASK_STATE_PENDING) == "pending"
    assert state_name(99) == "unknown" and state_name(0) == "unknown"


def test_mux_refuses_duplicates_empty_types_and_unknown_strategies() -> None:
    mux = Mux()
    mux.handle("a", lambda t: None, concurrency=[ConcurrencyRule("input.k", 2)])
    with pytest.raises(ValueError):
        mux.handle("a", lambda t: None)
    with pytest.raises(ValueError):
        mux.handle("", lambda t: None)
    with pytest.raises(ValueError):
        mux.handle("b", lambda t: None, concurrency=[ConcurrencyRule("input.k", 1, strategy="FIFO")])

    @mux.batch_task("digest")
    def digest(tasks: list[object]) -> None:
        pass

    assert (mux.types, mux.batch_types, mux.rules_for("a")[0].max_runs, mux.rules_for("zzz")) == (["a", "digest"], ["digest"], 2, [])


def test_handlers_get_the_context_only_when_they_take_it() -> None:
    assert not wants_context(lambda task: None)
    assert wants_context(lambda task, ctx: None)
    assert wants_context(lambda *args: None)


def test_results_and_skip_retry_markers() -> None:
    assert (encode_result(None), encode_result("é"), encode_result(b"\x00"), encode_result({"a": 1})) == (b"", "é".encode(), b"\x00", b'{"a":1}')
    assert is_skip_retry(SkipRetry("x")) and is_skip_retry(skip_retry(ValueError("y"))) and not is_skip_retry(ValueError("z"))
    assert isinstance(skip_retry("text"), SkipRetry)


def test_attempt_end_counts_the_nodes_remaining_time_from_arrival() -> None:
    d = worker_service_pb2.Delivery(lease_expires_at_ms=10_000 + 30_000, deadline_at_ms=10_000 + 5_000)
    assert attempt_end(d, 30_000, received_at=100.0) == pytest.approx(105.0)  # whatever the clocks' skew
    assert attempt_end(worker_service_pb2.Delivery(lease_expires_at_ms=1), 30_000, 100.0) is None


def test_truncation_keeps_whole_characters_and_says_so() -> None:
    data = ("é" * 100).encode()
    cut = _truncate(data, 64)
    assert len(cut) <= 64 and cut.decode() == "é" * 16 + "…[truncated 168 bytes]"
    assert _truncate(b"x" * 3_000_000, 1024 * 1024).endswith("…[truncated 1.9 MiB]".encode())
    assert _truncate(b"short", 64) == b"short"
    json.loads(json.dumps(cut.decode()))  # valid UTF-8


def _route(queue: str, address: str) -> worker_service_pb2.QueueRoute:
    return worker_service_pb2.QueueRoute(queue=queue, node_id="n", address=address)


def test_placement_moves_queues_by_their_routes_and_hands_them_back_with_a_doubling_cool_down() -> None:
    p = QueuePlacement([("a", 1), ("b", 2), ("c", 1)], "main:1")
    assert p.queues_of(MAIN) == [("a", 1), ("b", 2), ("c", 1)]
    # Only queues the answering loop polls move; a route naming the main node keeps its queue there.
    assert p.route(MAIN, [_route("b", "n2:1"), _route("c", "main:1"), _route("x", "n3:1")], 0.0)
    assert p.queues_of(MAIN) == [("a", 1), ("c", 1)] and p.queues_of("n2:1") == [("b", 2)] and p.addresses() == ["n2:1"]
    assert not p.route("n3:1", [_route("b", "n3:1")], 0.0)  # a late answer from another loop moves nothing
    p.hand_back("n2:1", 10.0)
    assert p.queues_of(MAIN) == [("a", 1), ("b", 2), ("c", 1)] and p.addresses() == []
    assert p.any_cooling_down(10.5) and not p.route(MAIN, [_route("b", "n2:1")], 10.5)  # cooling down for 1 s
    assert p.route(MAIN, [_route("b", "n2:1")], 11.0) and not p.any_cooling_down(11.0)
    p.hand_back("n2:1", 20.0)  # the second hand-back: 2 s
    assert p.any_cooling_down(21.9) and not p.any_cooling_down(22.0)
    for _ in range(10):
        p.hand_back("n2:1", 100.0)
    assert p.any_cooling_down(100.0 + ROUTE_COOLDOWN_MAX_S - 0.1) and not p.any_cooling_down(100.0 + ROUTE_COOLDOWN_MAX_S)
    p.reached("n2:1")
    assert not p.any_cooling_down(100.0)


def test_lease_share_gives_one_loop_everything_an_idle_one_a_slot_and_busy_ones_equal_shares() -> None:
    assert lease_share(10, 1, 0, True) == 10
    assert lease_share(10, 3, 3, True) == 1
    assert lease_share(10, 3, 2, False) == 5
    assert lease_share(10, 3, 0, False) == 10


def test_slot_budget_never_reserves_more_than_is_free_across_loops() -> None:
    """Three loops reserving and running deliveries at random: running plus reserved never
    exceeds the total, and every loop gets slots (first come, first served)."""

    async def main() -> tuple[int, list[int]]:
        rng = random.Random(5)
        running = 0
        budget = SlotBudget(4, lambda: running)
        worst = 0
        served = [0, 0, 0]

        async def loop(i: int) -> None:
            nonlocal running, worst
            for _ in range(200):
                slots = await budget.reserve(lambda free: rng.randint(1, free + 2))
                worst = max(worst, running + budget._reserved)
                await asyncio.sleep(0)
                taken = rng.randint(0, slots)  # the answer fills some of the reservation
                running += taken
                budget.release(slots)
                served[i] += 1
                for _ in range(taken):
                    await asyncio.sleep(0)
                    running -= 1
                    budget.freed()

        await asyncio.gather(*(loop(i) for i in range(3)))
        budget.close()
        return worst, served

    worst, served = asyncio.run(main())
    assert worst <= 4
    assert served == [200, 200, 200]


def test_a_closed_slot_budget_ends_every_waiting_reservation() -> None:
    async def main() -> list[int]:
        budget = SlotBudget(1, lambda: 1)  # every slot is running
        waiting = [asyncio.ensure_future(budget.reserve(lambda free: free)) for _ in range(2)]
        await asyncio.sleep(0)
        budget.close()
        return list(await asyncio.gather(*waiting))

    assert asyncio.run(main()) == [0, 0]


def test_status_codes_are_the_nine_the_node_uses() -> None:
    import grpc

    from conveyor._status import code_name

    for name in ("INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED",
                 "UNAVAILABLE", "UNAUTHENTICATED", "PERMISSION_DENIED", "INTERNAL"):
        assert code_name(getattr(grpc.StatusCode, name)) == name
    assert code_name(grpc.StatusCode.PERMISSION_DENIED.value[0]) == "PERMISSION_DENIED"  # an ItemError's number
    assert (code_name(grpc.StatusCode.DEADLINE_EXCEEDED), code_name(grpc.StatusCode.UNIMPLEMENTED)) == ("UNAVAILABLE", "INTERNAL")


def test_a_settle_item_refused_unavailable_is_sent_again_and_one_refused_for_good_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the item retry a finished task whose commit the log did not acknowledge stays
    # active until its lease lapses, then runs again.
    monkeypatch.setattr("conveyor.worker.RECONNECT_BASE_S", 0.001)
    refusals = [
        {"t1": (14, "LOG_UNAVAILABLE"), "t2": (9, "LEASE_NOT_HELD")},
        {"t1": (14, "LOG_UNAVAILABLE")},
        {},
    ]
    calls: list[list[str]] = []

    class Stub:
        async def Settle(self, request: worker_service_pb2.SettleRequest, **_: object) -> worker_service_pb2.SettleResponse:
            calls.append([s.task_id for s in request.settlements])
            refused = refusals[len(calls) - 1]
            return worker_service_pb2.SettleResponse(results=[
                worker_service_pb2.SettleResult(task_id=s.task_id, error=task_pb2.ItemError(code=refused[s.task_id][0], reason=refused[s.task_id][1], message="no"))
                if s.task_id in refused else worker_service_pb2.SettleResult(task_id=s.task_id)
                for s in request.settlements
            ])

    reported: list[str] = []
    worker = Worker(address="127.0.0.1:1", on_error=lambda error, context: reported.append(getattr(error, "reason", "")))
    worker._stub = Stub()
    batch = [worker_service_pb2.Settlement(queue="q", lease_id="L1", task_id=f"t{i}") for i in range(3)]
    asyncio.run(worker._send_settles(batch, False))
    assert calls == [["t0", "t1", "t2"], ["t1"], ["t1"]]
    assert reported == ["LOG_UNAVAILABLE", "LEASE_NOT_HELD", "LOG_UNAVAILABLE"]


def test_a_batch_item_error_keeps_its_reason_field_and_details() -> None:
    from conveyor._status import from_item_error

    wire = task_pb2.ItemError(code=14, reason="OWNER_DOWN", message="down", field="tasks[1].queue",
                              details={"owner": "n2", "partition": "4"})
    error = from_item_error(task_pb2.ItemError.FromString(wire.SerializeToString()))
    assert (error.code, error.reason, error.field, error.details) == ("UNAVAILABLE", "OWNER_DOWN", "tasks[1].queue", {"owner": "n2", "partition": "4"})
    assert from_item_error(task_pb2.ItemError(code=6, reason="TASK_ID_CONFLICT", message="taken")).details == {}
