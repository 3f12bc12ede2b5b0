/**
 * A member lease's keep-alive, sent to every etcd endpoint at once.
 *
 * Why not the shared etcd3 client: it sends each keep-alive stream to one endpoint picked
 * at random, and its fault handling works against us while etcd elects a leader. When
 * the leader dies, the followers hold keep-alives until a new leader exists (etcd
 * forwards a renewal to the leader), so they time out; etcd3 counts a timeout as a
 * failure of that endpoint, and three in a row open the endpoint's circuit breaker for
 * 5 s. With the dead endpoint failing too, every endpoint could be refused for seconds
 * after the election had ended, and a node fenced itself (3/4 of its TTL without a
 * renewal) although its lease was never in danger (etcd's new leader extends every
 * lease by a full TTL when it takes office).
 *
 * So each endpoint gets a small client of its own, without retries or circuit breakers,
 * and every keep-alive goes to all of them in parallel: the first endpoint that answers
 * decides, which is the fastest path to the leader there is. "lost" is etcd's own answer
 * (the lease is unknown, TTL 0), which only the leader gives, so one such answer is
 * enough. Cost: one small stream per endpoint per keep-alive, every TTL/3.
 *
 * Every answer is noted per endpoint, the later ones too, so the node knows which
 * endpoints answer now: its watches stream from one that does, and move when it stops
 * (etcd-coordination.ts).
 */
import { Etcd3 } from "etcd3";
import { etcdClientOptions } from "./etcd-answers.js";
import type { KeepAliveResult } from "./coordination.js";

export class EndpointKeepAlives {
  private readonly clients: Array<{ endpoint: string; client: Etcd3 }>;
  /** When each endpoint last answered a keep-alive (Date.now()), and when the first was sent. */
  private readonly answeredAt = new Map<string, number>();
  private firstSentAt: number | undefined;
  private rotation = 0;

  constructor(endpoints: readonly string[], dialTimeoutMs: number) {
    this.clients = endpoints.map((endpoint) => ({
      endpoint,
      client: new Etcd3(etcdClientOptions([endpoint], { dialTimeout: dialTimeoutMs }, false)),
    }));
  }

  /** Renews `leaseId` once: "alive" or "lost" from the first endpoint that answers; throws when none does within `timeoutMs`. */
  once(leaseId: string, timeoutMs: number): Promise<KeepAliveResult> {
    const deadline = Date.now() + timeoutMs;
    this.firstSentAt ??= Date.now();
    return new Promise<KeepAliveResult>((resolve, reject) => {
      const errors: string[] = [];
      let settled = false;
      for (const { endpoint, client } of this.clients) {
        renewAt(client, leaseId, deadline).then(
          (result) => {
            this.answeredAt.set(endpoint, Date.now());
            if (settled) return;
            settled = true;
            resolve(result);
          },
          (err: unknown) => {
            errors.push(`${endpoint}: ${err instanceof Error ? err.message : String(err)}`);
            if (!settled && errors.length === this.clients.length) {
              settled = true;
              reject(new Error(`no etcd endpoint renewed the member lease within ${timeoutMs}ms (${errors.join("; ")})`));
            }
          });
      }
    });
  }

  /**
   * Every endpoint, the ones that answered a keep-alive most recently first; those that
   * never answered (no lease yet) after them, starting with a different one on each call,
   * so a retry goes elsewhere first.
   */
  byFreshness(): string[] {
    const start = this.rotation++;
    const rotated = this.clients.map((_, i) => this.clients[(start + i) % this.clients.length]!.endpoint);
    const at = (endpoint: string) => this.answeredAt.get(endpoint) ?? -Infinity;
    return rotated.sort((a, b) => at(b) - at(a));
  }

  /**
   * Has `endpoint` stopped answering while another one answers: silent for `silentMs`
   * (since its last answer, or since the first keep-alive if it never answered) although
   * some endpoint answered within that time? Never while no endpoint answers at all (no
   * lease, or etcd unreachable: moving cannot help).
   */
  leftBehind(endpoint: string, silentMs: number): boolean {
    const now = Date.now();
    const others = [...this.answeredAt.values()].some((at) => now - at < silentMs);
    const since = this.answeredAt.get(endpoint) ?? this.firstSentAt;
    return others && since !== undefined && now - since >= silentMs;
  }

  close(): void {
    for (const { client } of this.clients) client.close();
  }
}

/** One keep-alive on one endpoint: a stream carrying one request and its one answer. */
async function renewAt(client: Etcd3, leaseId: string, deadline: number): Promise<KeepAliveResult> {
  const stream = await client.leaseClient.leaseKeepAlive({ deadline });
  try {
    const ttl = await new Promise<string>((resolve, reject) => {
      stream.on("data", (res: { TTL: string }) => resolve(res.TTL));
      stream.on("error", reject);
      stream.on("end", () => reject(new Error("the keep-alive stream ended without an answer")));
      stream.write({ ID: leaseId });
    });
    return Number(ttl) > 0 ? "alive" : "lost";
  } finally {
    stream.end();
  }
}
