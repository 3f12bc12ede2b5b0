"""Token and TLS for the Python worker and clients, against real nodes: one with an auth file
(a producer token, a worker token), one serving TLS with a certificate made here by openssl
(no private key is checked in) and requiring client certificates (mTLS), as the TS SDK's
test/integration/tls.test.ts does for its own."""
from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import NodeProcess, Recorder, running, wait_state
from conveyor import AsyncClient, Client, ConveyorError, Task, Tls, Worker


def _token() -> str:
    return "cvy_" + secrets.token_urlsafe(32)


@pytest.fixture(scope="module")
def auth_node() -> Iterator[tuple[NodeProcess, str, str]]:
    """A node with an auth file: a producer token and a worker token (roles as their names say)."""
    producer, worker = _token(), _token()
    folder = tempfile.mkdtemp(prefix="conveyor-pytest-auth-")
    auth = os.path.join(folder, "auth.yaml")
    with open(auth, "w") as f:
        f.write("tokens:\n"
                f"  - name: producer\n    sha256: {hashlib.sha256(producer.encode()).hexdigest()}\n    roles: [producer]\n"
                f"  - name: worker\n    sha256: {hashlib.sha256(worker.encode()).hexdigest()}\n    roles: [worker]\n"
                "metrics_public: true\n")
    n = NodeProcess({"auth_file": auth})
    try:
        yield n, producer, worker
    finally:
        n.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_worker_with_a_token_runs_tasks_on_a_node_with_an_auth_file(auth_node: tuple[NodeProcess, str, str]) -> None:
    node, producer, worker_token = auth_node
    worker = Worker(address=node.address, queues=["secured"], token=worker_token)
    seen = Recorder()

    @worker.task("py:secured")
    def handle(task: Task) -> str:
        seen.add(task.id)
        return "ok"

    with Client(node.address, timeout=10, token=producer) as client, running(worker):
        info = client.enqueue("py:secured", {"n": 1}, queue="secured")
        done = wait_state(client, info.id, "completed")  # leased, run and settled with the worker's token
    assert done.result == b"ok" and seen.calls == [info.id]


def test_a_worker_without_a_token_is_refused_at_start(auth_node: tuple[NodeProcess, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    node, _, _ = auth_node
    monkeypatch.delenv("CONVEYOR_TOKEN", raising=False)
    worker = Worker(address=node.address, queues=["secured"])
    worker.task("py:secured")(lambda task: None)
    with pytest.raises(ConveyorError) as refused:
        asyncio.run(worker.start())
    assert refused.value.code == "UNAUTHENTICATED"


def test_the_worker_takes_its_token_from_the_environment(auth_node: tuple[NodeProcess, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    node, producer, worker_token = auth_node
    monkeypatch.setenv("CONVEYOR_TOKEN", worker_token)
    worker = Worker(address=node.address, queues=["secured-env"])
    seen = Recorder()
    worker.task("py:secured")(lambda task: seen.add(task.id))
    with Client(node.address, timeout=10, token=producer) as client, running(worker):
        info = client.enqueue("py:secured", None, queue="secured-env")
        wait_state(client, info.id, "completed")
    assert seen.calls == [info.id]


class _Certs:
    """A CA, the node's certificate for 127.0.0.1 and localhost, a client certificate, and a CA that signed nothing."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="conveyor-pytest-certs-"))
        for name in ("ca", "other-ca"):
            self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                          "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt")
        self._sign("node", "/CN=node", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        self._sign("client", "/CN=py-worker", "extendedKeyUsage=clientAuth\n")

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.dir, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def _sign(self, name: str, subject: str, extensions: str) -> None:
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject,
                      "-keyout", f"{name}.key", "-out", f"{name}.csr")
        (self.dir / f"{name}.ext").write_text(extensions)
        self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                      "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt")

    def read(self, name: str) -> bytes:
        return (self.dir / name).read_bytes()


@pytest.fixture(scope="module")
def tls_node() -> Iterator[tuple[NodeProcess, _Certs]]:
    """A node serving TLS and requiring a client certificate signed by the CA (mTLS); the
    auth file gives the client certificate's CN every role it needs."""
    certs = _Certs()
    auth = certs.dir / "auth.yaml"
    auth.write_text("certificates:\n  - { name: py-fleet, common_name: py-worker, roles: [producer, worker, reader] }\n")
    n = NodeProcess({"tls_cert": str(certs.dir / "node.crt"), "tls_key": str(certs.dir / "node.key"),
                     "tls_client_ca": str(certs.dir / "ca.crt"), "auth_file": str(auth)})
    try:
        yield n, certs
    finally:
        n.stop()
        shutil.rmtree(certs.dir, ignore_errors=True)


def test_worker_and_clients_over_mtls(tls_node: tuple[NodeProcess, _Certs]) -> None:
    node, certs = tls_node
    tls = Tls(ca=certs.read("ca.crt"), cert=certs.read("client.crt"), key=certs.read("client.key").decode())
    worker = Worker(address=node.address, queues=["tls"], tls=tls)
    seen = Recorder()
    worker.task("py:tls")(lambda task: seen.add(task.id))

    async def enqueue_async() -> str:
        async with AsyncClient(node.address, timeout=10, tls=tls) as client:
            return (await client.enqueue("py:tls", {"via": "async"}, queue="tls")).id

    with Client(node.address, timeout=10, tls=tls) as client, running(worker):
        first = client.enqueue("py:tls", {"via": "sync"}, queue="tls").id
        second = asyncio.run(enqueue_async())
        for task_id in (first, second):
            wait_state(client, task_id, "completed")
    assert sorted(seen.calls) == sorted([first, second])


def test_a_node_signed_by_another_ca_is_not_trusted(tls_node: tuple[NodeProcess, _Certs]) -> None:
    node, certs = tls_node
    untrusting = Tls(ca=certs.read("other-ca.crt"), cert=certs.read("client.crt"), key=certs.read("client.key"))
    with Client(node.address, timeout=2, tls=untrusting) as client:
        with pytest.raises(ConveyorError) as refused:
            client.get_task("0" * 26)
    # The handshake fails, so the call never reaches the node: waiting for it ends at the deadline.
    assert refused.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def test_malformed_tls_options_are_refused_when_made() -> None:
    with pytest.raises(ValueError, match="give both cert and key"):
        Worker(queues=["q"], tls=Tls(cert=b"-----BEGIN CERTIFICATE-----\n"))
    with pytest.raises(ValueError, match="expected PEM text"):
        Client("127.0.0.1:1", tls=Tls(ca=b"/etc/ssl/ca.crt"))
    with pytest.raises(TypeError, match="expected True or conveyor.Tls"):
        AsyncClient("127.0.0.1:1", tls="ca.crt")  # type: ignore[arg-type]


def test_a_plaintext_client_is_refused_by_a_tls_node(tls_node: tuple[NodeProcess, _Certs]) -> None:
    node, _ = tls_node
    with Client(node.address, timeout=2) as client:
        with pytest.raises(ConveyorError) as refused:
            client.get_task("0" * 26)
    assert refused.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")

