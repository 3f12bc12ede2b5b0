"""The producer client against a real node: enqueue, batch, tx, get, cancel and errors."""
from __future__ import annotations

from datetime import timedelta

import pytest

from conftest import NodeProcess
from conveyor import Client, ConveyorError, NewTask


def test_enqueue_and_get_round_trip_json_and_bytes(client: Client, queue: str) -> None:
    info = client.enqueue("email:send", {"to": "ada@example.com", "n": "é"}, queue=queue, priority=7, max_retry=3,
                          timeout=timedelta(seconds=30), metadata={"tenant": "acme"})
    assert info.queue == queue and info.state == "pending" and not info.existed
    t = client.get_task(info.id)
    assert t.payload == '{"to":"ada@example.com","n":"é"}'.encode()
    assert t.content_type == "application/json"
    assert t.json() == {"to": "ada@example.com", "n": "é"}
    assert (t.metadata, t.priority, t.max_retry, t.state, t.type) == ({"tenant": "acme"}, 7, 3, "pending", "email:send")
    raw = client.get_task(client.enqueue("blob", b"\x00\xff", queue=queue).id)
    assert (raw.payload, raw.content_type) == (b"\x00\xff", "application/octet-stream")


def test_unique_key_conflict_carries_code_and_reason(client: Client, queue: str) -> None:
    client.enqueue("t", {}, queue=queue, unique_key="k1")
    with pytest.raises(ConveyorError) as err:
        client.enqueue("t", {}, queue=queue, unique_key="k1")
    assert (err.value.code, err.value.reason) == ("ALREADY_EXISTS", "UNIQUE_KEY_CONFLICT")
    client.enqueue("t", {}, queue=queue, unique_key="k2")  # another key is free


def test_invalid_field_names_the_field(client: Client, queue: str) -> None:
    with pytest.raises(ConveyorError) as err:
        client.enqueue("t", {}, queue=queue, priority=99)
    assert (err.value.code, err.value.reason, err.value.field) == ("INVALID_ARGUMENT", "INVALID_FIELD", "task.priority")


def test_task_id_is_idempotent(client: Client, queue: str) -> None:
    first = client.enqueue("t", {"a": 1}, queue=queue, task_id="fixed-1")
    again = client.enqueue("t", {"a": 1}, queue=queue, task_id="fixed-1")
    assert (first.id, first.existed, again.id, again.existed) == ("fixed-1", False, "fixed-1", True)


def test_enqueue_batch_has_per_item_results(client: Client, queue: str) -> None:
    res = client.enqueue_batch([NewTask("t", {"i": 1}, queue=queue), NewTask("t", {"i": 2}, queue=queue, priority=0),
                                NewTask("t", {"i": 3}, queue=queue)])
    assert len(res) == 3
    ok1, bad, ok3 = res
    assert not isinstance(ok1, ConveyorError) and not isinstance(ok3, ConveyorError)
    assert isinstance(bad, ConveyorError) and bad.reason == "INVALID_FIELD" and bad.field is not None and "priority" in bad.field
    assert client.get_task(ok3.id).json() == {"i": 3}


def test_enqueue_tx_is_all_or_nothing(client: Client, queue: str) -> None:
    with pytest.raises(ConveyorError) as err:
        client.enqueue_tx([NewTask("t", 1, queue=queue, task_id="tx-a"), NewTask("t", 2, queue=queue, priority=0)])
    assert err.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ConveyorError) as missing:
        client.get_task("tx-a")
    assert missing.value.reason == "TASK_NOT_FOUND"
    ok = client.enqueue_tx([NewTask("t", 1, queue=queue), NewTask("t", 2, queue=queue)])
    assert [i.state for i in ok] == ["pending", "pending"]


def test_cancel_a_pending_task(client: Client, queue: str) -> None:
    info = client.enqueue("t", None, queue=queue)
    assert client.cancel_task(info.id).state == "cancelled"
    assert client.get_task(info.id).cancel_reason != ""


def test_scheduled_task_is_not_ready_before_its_time(client: Client, queue: str) -> None:
    info = client.enqueue("t", None, queue=queue, process_in=timedelta(hours=1))
    t = client.get_task(info.id)
    assert info.state == "scheduled" and t.ready_at is not None and t.created_at is not None
    assert timedelta(minutes=59) < t.ready_at - t.created_at <= timedelta(hours=1, seconds=1)


def test_unreachable_node_is_unavailable_unreachable() -> None:
    with Client("127.0.0.1:1", timeout=0.5) as c:
        with pytest.raises(ConveyorError) as err:
            c.get_task("x")
    assert (err.value.code, err.value.reason) == ("UNAVAILABLE", "UNREACHABLE")


def test_node_fixture_is_a_real_node(node: NodeProcess) -> None:
    assert node.proc.poll() is None and node.address.startswith("127.0.0.1:")
