"""Pieces of the SDK without a node: encoding, durations, the mux, attempt ends, truncation."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from conveyor import ConcurrencyRule, Mux, NewTask, SkipRetry, encode_json, is_skip_retry, skip_retry
from conveyor.mux import encode_result, wants_context
from conveyor.task import state_name, to_spec
from conveyor.v1 import task_pb2, worker_service_pb2
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
