/**
 * A cluster with authentication on (issue 13, node identity), with real processes on one
 * etcd: the nodes know each other by the cluster secret (`cluster_secret_file`), so
 * partitions move with auth on; a forwarded call carries the caller's verified identity,
 * whose roles and queue scope the owner applies; a client cannot pass itself off as a
 * node; a node with the wrong secret gets no partition and loses nothing; and a node with
 * auth on in a cluster refuses to start without a cluster secret; and with TLS and mTLS
 * the nodes call each other over TLS, so a caller known only by its client certificate
 * is identified at the owner.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import type { DescService } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { Client, ConveyorError, Mux, Worker, json, newTask } from "../../src/index.js";
import { AdminService } from "../../src/gen/conveyor/v1/admin_service_pb.js";
import { ClusterService } from "../../src/gen/conveyor/v1/cluster_service_pb.js";
import { clientTlsCredentials, type ClientTlsPem } from "../../src/rpc/channel-tls.js";
import { RpcChannel } from "../../src/rpc/client.js";
import { toGrpcDefinition } from "../../src/rpc/service-definition.js";
import { fromServiceError } from "../../src/rpc/status.js";
import { newClusterSecret } from "../../src/server/security/cluster-secret.js";
import { encodeOnBehalfOf, ON_BEHALF_OF } from "../../src/server/security/on-behalf-of.js";
import { clusterFixture } from "../support/cluster.js";
import { makeCerts } from "../support/certs.js";
import { eventually, NodeProcess } from "../support/node-process.js";
import { Ring } from "../support/ring.js";
import { authFileWithRoles, rawHttp, startOutcome } from "../support/security.js";

const fixture = clusterFixture();
const { nodes, closers } = fixture;
const auth = authFileWithRoles({ scoped: ["in-*"] });
const { tokens, scopedTokens } = auth;

function secretFile(secret = newClusterSecret()): string {
  const file = join(mkdtempSync(join(tmpdir(), "conveyor-secret-")), "cluster.secret");
  writeFileSync(file, `${secret}\n`);
  return file;
}
const SECRET = secretFile();

function startNode(cluster: string, id: string, secret = SECRET, extra: Record<string, string> = {}): Promise<NodeProcess> {
  return NodeProcess.start({
    settings: {
      cluster_etcd: fixture.etcd.endpoints, cluster_name: cluster, node_id: id, cluster_member_ttl: "3s",
      auth_file: auth.file, cluster_secret_file: secret, ...extra,
    },
  }).then((n) => {
    nodes.push(n);
    return n;
  });
}

function client(node: NodeProcess, token: string): Client {
  const c = new Client({ address: node.grpcAddress, token });
  closers.push(() => c.close());
  return c;
}

/** The node's cluster status, read with the reader token, or with a client certificate (`tls`) on an mTLS node. */
function statusOf(node: NodeProcess, tls?: ClientTlsPem) {
  const channel = new RpcChannel(tls ? { address: node.grpcAddress, credentials: clientTlsCredentials(tls) } : { address: node.grpcAddress, token: tokens.reader });
  closers.push(() => channel.close());
  return channel.service(AdminService).getClusterStatus({ withLeases: false }, { timeoutMs: 5_000 });
}

/** Waits until every node sees `count` active members (so the ring spreads the partitions). */
async function allActive(started: NodeProcess[], count: number, tls?: ClientTlsPem): Promise<void> {
  await eventually(`every node to see ${count} active members`, async () => {
    const views = await Promise.all(started.map((n) => statusOf(n, tls)));
    return views.every((v) => v.members.length === count && v.members.every((m) => m.state === 2)) ? true : undefined;
  }, 20_000);
}

/** Where each queue's partition is held, as `node` sees it. */
async function holders(node: NodeProcess, queues: string[], tls?: ClientTlsPem): Promise<Map<string, string>> {
  const status = await statusOf(node, tls);
  const ring = new Ring(["x"], 1, status.partitions);
  return new Map(queues.map((q) => [q, status.partitionStates[ring.partitionOf(q)]!.owner]));
}

/** The first `<prefix><i>` queue whose partition the ring over `ids` gives `owner`. */
function queueOwnedBy(prefix: string, ids: string[], owner: string): string {
  const ring = new Ring(ids, 1);
  for (let i = 0; ; i++) if (ring.ownerOf(`${prefix}${i}`) === owner) return `${prefix}${i}`;
}

/** A unary call with exactly this metadata (the SDK never sends on-behalf-of): the owner's refusal as a ConveyorError. */
function rawCall(node: NodeProcess, service: DescService, method: string, request: unknown, metadata: Record<string, string>): Promise<unknown> {
  const c = new grpc.Client(node.grpcAddress, grpc.credentials.createInsecure());
  closers.push(() => c.close());
  const def = toGrpcDefinition(service)[method]!;
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve, reject) => c.makeUnaryRequest(def.path, def.requestSerialize, def.responseDeserialize, request, md,
    { deadline: Date.now() + 10_000 }, (err, res) => (err ? reject(fromServiceError(err)) : resolve(res))));
}

async function refusalOf(call: Promise<unknown>): Promise<ConveyorError> {
  try {
    await call;
  } catch (e) {
    if (e instanceof ConveyorError) return e;
    throw e;
  }
  throw new Error("expected the call to be refused");
}

/** The sum of a counter's series on `node`'s /metrics whose labels contain every one of `labels`. */
async function counter(node: NodeProcess, name: string, labels: string[] = []): Promise<number> {
  const res = await rawHttp(node.httpAddress, "/metrics", { headers: { host: node.httpAddress, authorization: `Bearer ${tokens.reader}` } });
  expect(res.status).toBe(200);
  return res.body.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .filter((l) => labels.every((x) => l.includes(x))).reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

/** A producer enqueueing round-robin over `queues` until stopped: every acknowledged id, every failure. */
function runProducer(c: Client, queues: string[]) {
  const acknowledged = new Set<string>();
  const failures: unknown[] = [];
  let stop = false;
  const done = (async () => {
    for (let i = 0; !stop; i++) {
      try {
        acknowledged.add((await c.enqueue(newTask("job", json({ i })), { queue: queues[i % queues.length]! })).id);
      } catch (error) {
        failures.push(error);
      }
    }
  })();
  return { acknowledged, failures, stop: async () => { stop = true; await done; } };
}

function runWorker(node: NodeProcess, queues: string[]): Map<string, number> {
  const ran = new Map<string, number>();
  const worker = new Worker({
    address: node.grpcAddress, token: tokens.worker, queues, concurrency: 16, handleSignals: false, leaseWaitMs: 500, logger: null,
    mux: new Mux().handle("job", async (task) => {
      ran.set(task.id, (ran.get(task.id) ?? 0) + 1);
    }),
  });
  closers.push(() => worker.stop());
  worker.start();
  return ran;
}

const handoffs = (node: NodeProcess) => node.logs.filter((l) => l.includes("\"partition handed off\"")).length;

describe("cluster with authentication on (real processes)", { timeout: 120_000 }, () => {
  it("scale out with an auth file: partitions move to the new node; a producer's token works through a non-owner; no call fails, nothing is lost", async () => {
    const cluster = `a-${randomUUID().slice(0, 8)}`;
    const [n1, n2] = await Promise.all([startNode(cluster, "n1"), startNode(cluster, "n2")]);
    await allActive([n1!, n2!], 2);
    const queues = Array.from({ length: 8 }, (_, i) => `aq${i}`);
    // The producer talks to n1 only; some of its queues are n2's, so those calls are forwarded.
    expect(queues.some((q) => new Ring(["n1", "n2"], 1).ownerOf(q) === "n2")).toBe(true);
    const load = runProducer(client(n1!, tokens.producer), queues);
    const ran = runWorker(n2!, queues);
    await eventually("some work done before the join", async () => (ran.size >= 100 ? true : undefined), 30_000);
    expect(await counter(n1!, "conveyor_cluster_forwarded_calls_total", ['method="Enqueue"'])).toBeGreaterThan(0);

    const n3 = await startNode(cluster, "n3");
    const toN3 = queues.filter((q) => new Ring(["n1", "n2", "n3"], 1).ownerOf(q) === "n3");
    expect(toN3.length).toBeGreaterThan(0);
    await eventually("n3 to hold every partition the ring gives it (handed off with auth on)", async () => {
      const held = await holders(n3, queues);
      return toN3.every((q) => held.get(q) === "n3") ? true : undefined;
    }, 30_000);
    const atMove = load.acknowledged.size;
    await eventually("more work after the move", async () => (load.acknowledged.size >= atMove + 100 ? true : undefined), 30_000);
    await load.stop();
    await eventually("every acknowledged task to run", async () => ([...load.acknowledged].every((id) => ran.has(id)) ? true : undefined), 30_000);

    expect(load.failures).toEqual([]);
    expect([...ran.values()].filter((n) => n > 1)).toEqual([]);
    expect(handoffs(n1!) + handoffs(n2!)).toBeGreaterThan(0);
    expect(await counter(n1!, "conveyor_cluster_handoffs_total", ['outcome="failed"']) + await counter(n2!, "conveyor_cluster_handoffs_total", ['outcome="failed"'])).toBe(0);
  });

  it("the owner applies the forwarded caller's scope: a scoped token works inside it through a non-owner and finds nothing outside it", async () => {
    const cluster = `a-${randomUUID().slice(0, 8)}`;
    const [n1, n2] = await Promise.all([startNode(cluster, "n1"), startNode(cluster, "n2")]);
    await allActive([n1!, n2!], 2);
    const inside = queueOwnedBy("in-", ["n1", "n2"], "n2");
    const outside = queueOwnedBy("out-", ["n1", "n2"], "n2");
    const scoped = client(n1!, scopedTokens.producer);

    // Inside the scope, through n1 to the owner n2: enqueued, and read back by id.
    const task = await scoped.enqueue(newTask("job", json({})), { queue: inside });
    expect((await scoped.getTask(task.id)).queue).toBe(inside);
    expect((await holders(n1!, [inside])).get(inside)).toBe("n2");
    // Outside it, a request naming the queue is refused where it arrives.
    const named = await refusalOf(scoped.enqueue(newTask("job", json({})), { queue: outside }));
    expect([named.code, named.reason]).toEqual(["PERMISSION_DENIED", "QUEUE_NOT_IN_SCOPE"]);
    // A task id n1 does not know goes on to n2, whose guard holds the scoped caller to its queues.
    const foreign = await client(n2!, tokens.admin).enqueue(newTask("job", json({})), { queue: outside });
    const hidden = await refusalOf(scoped.getTask(foreign.id));
    expect([hidden.code, hidden.reason]).toEqual(["NOT_FOUND", "TASK_NOT_FOUND"]);
    // The same id through the same node is found by an unscoped token: the refusal was the scope's.
    expect((await client(n1!, tokens.reader).getTask(foreign.id)).queue).toBe(outside);
    // The owner's audit line may reach this process after its answer: read until it arrives.
    await eventually("n2 to log the refusal of producer-scoped's scope (QUEUE_NOT_IN_SCOPE)", async () =>
      (n2!.logs.some((l) => l.includes("QUEUE_NOT_IN_SCOPE") && l.includes("producer-scoped")) ? true : undefined), 10_000);
  });

  it("a client cannot pass itself off as a node: on-behalf-of with an ordinary token, and ClusterService with an admin token or a wrong secret, are refused and change nothing", async () => {
    const cluster = `a-${randomUUID().slice(0, 8)}`;
    const n1 = await startNode(cluster, "n1");
    await allActive([n1], 1);
    const admin = client(n1, tokens.admin);
    await admin.enqueue(newTask("job", json({})), { queue: "victim" });
    const root = { name: "root", roles: new Set(["admin"] as const), via: "token" as const, scope: undefined };

    const pretend = await refusalOf(rawCall(n1, AdminService, "pauseQueue", { queue: "victim" },
      { authorization: `Bearer ${tokens.producer}`, [ON_BEHALF_OF]: encodeOnBehalfOf(root), "conveyor-forwarded-by": "n9" }));
    expect([pretend.code, pretend.reason]).toEqual(["PERMISSION_DENIED", "ROLE_REQUIRED"]);
    expect(pretend.message).toMatch(/producer-token is not a node/);
    expect((await admin.admin.getQueue("victim"))?.paused).toBe(false);

    const accept = { partition: 0, fromNode: "n9", epoch: 1n, transferId: randomUUID(), chunk: 0, last: true, data: new Uint8Array(0) };
    const byAdmin = await refusalOf(rawCall(n1, ClusterService, "acceptPartition", accept, { authorization: `Bearer ${tokens.admin}` }));
    expect([byAdmin.code, byAdmin.reason]).toEqual(["PERMISSION_DENIED", "ROLE_REQUIRED"]);
    const bySecret = await refusalOf(rawCall(n1, ClusterService, "acceptPartition", accept, { authorization: `Cluster ${newClusterSecret()}` }));
    expect([bySecret.code, bySecret.reason]).toEqual(["UNAUTHENTICATED", "CREDENTIALS_UNKNOWN"]);
    expect(bySecret.message).toMatch(/cluster_secret_file/);
    expect(await counter(n1, "conveyor_auth_failures_total", ['reason="ROLE_REQUIRED"'])).toBeGreaterThanOrEqual(2);
  });

  it("a node with the wrong cluster secret gets no partition: handoffs to it fail with a clear log line and metrics, and nothing is lost", async () => {
    const cluster = `a-${randomUUID().slice(0, 8)}`;
    const [n1, n2] = await Promise.all([startNode(cluster, "n1"), startNode(cluster, "n2")]);
    await allActive([n1!, n2!], 2);
    const queues = Array.from({ length: 8 }, (_, i) => `wq${i}`);
    const admin = client(n1!, tokens.admin);
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push((await admin.enqueue(newTask("job", json({ i })), { queue: queues[i % queues.length]! })).id);

    const n3 = await startNode(cluster, "n3", secretFile());
    const toN3 = queues.filter((q) => new Ring(["n1", "n2", "n3"], 1).ownerOf(q) === "n3");
    expect(toN3.length).toBeGreaterThan(0);
    await eventually("a handoff to n3 to fail, logged as n3 refusing the cluster credential", async () =>
      [...n1!.logs, ...n2!.logs].some((l) => l.includes("handoff failed") && l.includes("refused this node's cluster credential")) ? true : undefined, 30_000);
    const failed = await counter(n1!, "conveyor_cluster_handoffs_total", ['outcome="failed"']) + await counter(n2!, "conveyor_cluster_handoffs_total", ['outcome="failed"']);
    expect(failed).toBeGreaterThan(0);
    expect(await counter(n3, "conveyor_auth_failures_total", ['reason="CREDENTIALS_UNKNOWN"'])).toBeGreaterThan(0);

    // The partitions stayed where they were, and every acknowledged task is still there.
    const held = await holders(n1!, queues);
    expect(toN3.filter((q) => held.get(q) === "n3")).toEqual([]);
    for (const id of ids) expect((await admin.getTask(id)).id).toBe(id);
  });

  it("with TLS and mTLS the nodes call each other over TLS: a caller known only by its client certificate is identified at the owner, its scope held there", async () => {
    const certs = makeCerts();
    const nodeCert = certs.node("conveyor-node", "IP:127.0.0.1,DNS:localhost");
    const certAuth = join(certs.dir, "auth.yaml");
    writeFileSync(certAuth, [
      "certificates:",
      '  - { name: billing-cert, common_name: billing, roles: [producer, reader], queues: ["in-*"] }',
      "  - { name: ops-cert, common_name: ops, roles: [admin] }",
    ].join("\n") + "\n");
    const tlsFor = (cn: string): { ca: Buffer; cert: Buffer; key: Buffer } => {
      const c = certs.client(cn);
      return { ca: certs.read(certs.caCert), cert: certs.read(c.cert), key: certs.read(c.key) };
    };
    const settings = { auth_file: certAuth, tls_cert: nodeCert.cert, tls_key: nodeCert.key, tls_client_ca: certs.caCert, cluster_tls_ca: certs.caCert };
    const cluster = `a-${randomUUID().slice(0, 8)}`;
    const [n1, n2] = await Promise.all([startNode(cluster, "n1", SECRET, settings), startNode(cluster, "n2", SECRET, settings)]);
    const ops = tlsFor("ops");
    await allActive([n1!, n2!], 2, ops);
    const inside = queueOwnedBy("in-", ["n1", "n2"], "n2");
    const outside = queueOwnedBy("out-", ["n1", "n2"], "n2");
    const billing = new Client({ address: n1!.grpcAddress, tls: tlsFor("billing"), timeoutMs: 15_000 });
    closers.push(() => billing.close());

    // No token anywhere: n1 identifies the caller by its certificate and n2, the owner, gets that identity.
    const task = await billing.enqueue(newTask("job", json({})), { queue: inside });
    expect((await holders(n1!, [inside], ops)).get(inside)).toBe("n2");
    expect((await billing.getTask(task.id)).queue).toBe(inside);
    const opsOnN2 = new Client({ address: n2!.grpcAddress, tls: ops, timeoutMs: 15_000 });
    closers.push(() => opsOnN2.close());
    const foreign = await opsOnN2.enqueue(newTask("job", json({})), { queue: outside });
    const hidden = await refusalOf(billing.getTask(foreign.id));
    expect([hidden.code, hidden.reason]).toEqual(["NOT_FOUND", "TASK_NOT_FOUND"]);
    // The owner's audit line may reach this process after its answer: read until it arrives.
    await eventually("n2 to log the refusal of billing-cert's scope (QUEUE_NOT_IN_SCOPE)", async () =>
      (n2!.logs.some((l) => l.includes("QUEUE_NOT_IN_SCOPE") && l.includes("billing-cert")) ? true : undefined), 10_000);
  });

  it("refuses to start with an auth file in a cluster but no cluster_secret_file, naming the setting; refuses a short secret", async () => {
    const refused = await startOutcome(["--set", `auth_file=${auth.file}`, "--set", "cluster_etcd=http://127.0.0.1:9"]);
    expect(refused.started).toBe(false);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/cluster_secret_file is not set/);
    expect(refused.dataDirFiles).toEqual([]);
    const short = secretFile("too-short");
    const weak = await startOutcome(["--set", `auth_file=${auth.file}`, "--set", "cluster_etcd=http://127.0.0.1:9", "--set", `cluster_secret_file=${short}`]);
    expect(weak.started).toBe(false);
    expect(weak.stderr).toMatch(/cluster_secret_file .*at least 32/);
  });
});
