"""Real-process clusters for the Python SDK's cluster tests: one etcd (Debian's
etcd-server, unpacked into .cache/apt by scripts/test-prerequisites.mjs, as for
test/support/etcd.ts; ETCD_BIN overrides it) and conveyord nodes on it, started as
conftest's NodeProcess with the cluster settings. Queues are picked by owner with the
ring the nodes compute (ring_placement.mjs, over dist/)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.request
import uuid
from pathlib import Path
from typing import Optional

import grpc

from conftest import NODE, REPO, NodeProcess, wait_for
from conveyor.v1 import admin_service_pb2 as apb, admin_service_pb2_grpc

HERE = Path(__file__).resolve().parent
MEMBER_ACTIVE = 2


def etcd_binary() -> str:
    for candidate in (os.environ.get("ETCD_BIN"), str(REPO / ".cache/apt/etcd-server/usr/bin/etcd"), "/usr/bin/etcd"):
        if candidate and os.path.exists(candidate):
            return candidate
    raise RuntimeError("no etcd binary: run `node scripts/test-prerequisites.mjs` (fetches Debian's etcd-server "
                       "into .cache/apt without starting its service) or set ETCD_BIN")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Etcd:
    """One etcd member on free loopback ports with a temp data dir; ready once /health says so."""

    def __init__(self) -> None:
        self.data_dir = tempfile.mkdtemp(prefix="conveyor-pytest-etcd-")
        client, peer = f"http://127.0.0.1:{_free_port()}", f"http://127.0.0.1:{_free_port()}"
        self.endpoints = client
        self.proc = subprocess.Popen(
            [etcd_binary(), "--name", "e0", "--data-dir", self.data_dir, "--listen-client-urls", client,
             "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"e0={peer}", "--initial-cluster-state", "new", "--logger", "zap", "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def healthy() -> Optional[bool]:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}")
            body = json.loads(urllib.request.urlopen(f"{client}/health", timeout=1).read())
            return True if body.get("health") == "true" else None

        try:
            wait_for("etcd to be healthy", healthy, 20)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def cluster_status(node: NodeProcess) -> apb.GetClusterStatusResponse:
    with grpc.insecure_channel(node.address) as channel:
        return admin_service_pb2_grpc.AdminServiceStub(channel).GetClusterStatus(apb.GetClusterStatusRequest(), timeout=5)


def workers_on(node: NodeProcess, worker_id: str) -> list[apb.WorkerInfo]:
    """The worker's entries as `node` lists them (every member's, merged)."""
    with grpc.insecure_channel(node.address) as channel:
        res = admin_service_pb2_grpc.AdminServiceStub(channel).ListWorkers(apb.ListWorkersRequest(), timeout=5)
    return [w for w in res.workers if w.worker_id == worker_id]


def new_cluster_name() -> str:
    return f"py-{uuid.uuid4().hex[:8]}"


def start_node(etcd: Etcd, cluster: str, node_id: str) -> NodeProcess:
    return NodeProcess({"cluster_etcd": etcd.endpoints, "cluster_name": cluster, "node_id": node_id, "cluster_member_ttl": "3s"})


def wait_members_active(nodes: list[NodeProcess]) -> None:
    def probe() -> Optional[bool]:
        views = [cluster_status(n) for n in nodes]
        ok = all(len(v.members) == len(nodes) and all(m.state == MEMBER_ACTIVE for m in v.members) for v in views)
        return True if ok else None

    wait_for(f"{len(nodes)} members active on every node", probe, 20)


def placement(prefix: str, count: int, ids: list[str]) -> dict[str, tuple[int, str]]:
    """queue → (partition, owner) for `<prefix>0..count-1` on the ring over `ids`, as the nodes compute it."""
    out = subprocess.run([NODE, str(HERE / "ring_placement.mjs"), prefix, str(count), *ids],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    return {q: (v["partition"], v["owner"]) for q, v in json.loads(out).items()}
