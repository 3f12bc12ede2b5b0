"""The Python worker's token in a cluster with an auth file (issue 13's "Workers" with the
security of the "Security" section): told of one node, the worker opens a channel to each
other owner of its queues, and every call on those channels carries its token too. Real
processes: one etcd and three conveyord nodes sharing an auth file and a cluster secret."""
from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator

import grpc
import pytest

from cluster_support import Etcd, MEMBER_ACTIVE, new_cluster_name, placement
from conftest import NodeProcess, running, wait_for
from conveyor import Client, ConveyorError, Worker
from conveyor.v1 import admin_service_pb2 as apb, admin_service_pb2_grpc

IDS = ["n1", "n2", "n3"]


def _token() -> str:
    return "cvy_" + secrets.token_urlsafe(32)


@pytest.fixture()
def secured_cluster() -> Iterator[tuple[dict[str, NodeProcess], dict[str, str]]]:
    """Three nodes with one auth file (admin, producer and worker tokens) and one cluster secret."""
    tokens = {"admin": _token(), "producer": _token(), "worker": _token()}
    folder = tempfile.mkdtemp(prefix="conveyor-pytest-cluster-auth-")
    auth, secret = os.path.join(folder, "auth.yaml"), os.path.join(folder, "cluster.secret")
    with open(auth, "w") as f:
        f.write("tokens:\n" + "".join(
            f"  - name: {name}\n    sha256: {hashlib.sha256(t.encode()).hexdigest()}\n    roles: [{name}]\n" for name, t in tokens.items()))
    with open(secret, "w") as f:
        f.write("cvc_" + secrets.token_urlsafe(32) + "\n")
    etcd = Etcd()
    cluster = new_cluster_name()
    nodes: dict[str, NodeProcess] = {}
    try:
        for node_id in IDS:
            nodes[node_id] = NodeProcess({"cluster_etcd": etcd.endpoints, "cluster_name": cluster, "node_id": node_id,
                                          "cluster_member_ttl": "3s", "auth_file": auth, "cluster_secret_file": secret})
        yield nodes, tokens
    finally:
        for n in nodes.values():
            n.stop()
        etcd.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _call(node: NodeProcess, token: str, method: str, request: object) -> object:
    """An AdminService call with `token`."""
    with grpc.insecure_channel(node.address) as channel:
        stub = admin_service_pb2_grpc.AdminServiceStub(channel)
        return getattr(stub, method)(request, timeout=5, metadata=(("authorization", f"Bearer {token}"),))


def test_a_worker_with_a_token_polls_every_owner_of_a_secured_cluster(secured_cluster: tuple[dict[str, NodeProcess], dict[str, str]]) -> None:
    nodes, tokens = secured_cluster

    def all_active() -> bool | None:
        views = [_call(n, tokens["admin"], "GetClusterStatus", apb.GetClusterStatusRequest()) for n in nodes.values()]
        return True if all(len(v.members) == 3 and all(m.state == MEMBER_ACTIVE for m in v.members) for v in views) else None  # type: ignore[attr-defined]

    wait_for("3 members active on every node", all_active, 30)
    owner = {q: o for q, (_, o) in placement("pysec", 60, IDS).items()}
    on_n2, on_n3 = (next(q for q, o in owner.items() if o == node_id) for node_id in ("n2", "n3"))

    ran: dict[str, float] = {}
    refused: list[str] = []

    def job(task) -> None:  # type: ignore[no-untyped-def]
        ran[task.id] = time.monotonic()

    def on_error(error: BaseException, context: str) -> None:
        if isinstance(error, ConveyorError) and error.code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            refused.append(f"{context}: {error.code}/{error.reason}")

    # Told of n1, which owns neither queue: the worker polls n2 and n3 on channels of its own.
    worker = Worker(address=nodes["n1"].address, queues=[on_n2, on_n3], concurrency=4, lease_wait=20,
                    token=tokens["worker"], on_error=on_error)
    worker.mux.handle("py:secure", job)
    with running(worker), Client(nodes["n1"].address, timeout=10, token=tokens["producer"]) as producer:
        wait_for("the worker to poll n2 and n3", lambda: True if sorted(worker.polled_nodes) == sorted(
            [nodes["n2"].address, nodes["n3"].address]) else None, 20)

        def parked_on_owners() -> bool | None:
            for node_id, queue in (("n2", on_n2), ("n3", on_n3)):
                res = _call(nodes[node_id], tokens["admin"], "ListWorkers", apb.ListWorkersRequest())
                if not any(w.worker_id == worker.worker_id and w.polling and queue in w.queues for w in res.workers):  # type: ignore[attr-defined]
                    return None
            return True

        # A Lease parked on each owner, for its own queue: each carried the worker's token.
        wait_for("a Lease of the worker parked on n2 and on n3", parked_on_owners, 20)
        ids = [producer.enqueue("py:secure", {"i": i}, queue=q).id for q in (on_n2, on_n3) for i in range(5)]
        wait_for("every task to run", lambda: True if all(i in ran for i in ids) else None, 20)
    assert refused == []
