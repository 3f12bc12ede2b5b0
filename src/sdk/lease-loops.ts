/**
 * A worker's lease loops, one per node that holds some of its queues, so that in a
 * cluster a worker parks on every owner and picks up a task wherever it arrives (issue
 * 13). A node's long poll parks only on queues it holds; a Lease naming queues of
 * several nodes could park on one node only.
 *
 * - The worker starts with one loop, on its configured address, for all its queues. Its
 *   Lease calls say `poll_owners`: a node holding only some of the queues answers at once
 *   with `routes` (owner and address of the others), and those queues move to a loop on
 *   that node's address (queue-placement.ts), over a new channel with the worker's token
 *   and TLS options. On a single node no answer carries routes: one loop, no new
 *   channel, every call as before.
 * - The loops share one budget of `concurrency` slots (slot-budget.ts).
 * - A loop whose node is unreachable or does not hold its queues gives them back to the
 *   main loop, which learns their routes again.
 * - Heartbeats and settles stay on the main connection: the node splits them by queue
 *   owner and forwards each part (rpc-routes.ts, `items`), so the worker need not know
 *   which loop leased what, one outbox keeps batching every outcome, and a lease whose
 *   partition moved is still found at its current owner. The cost is one hop more for
 *   queues held elsewhere. On stop, every node polled directly is fenced with its own
 *   draining Settle (`fence`): a node's drain fence (the broker's) is per node, and a
 *   Settle through the main node reaches another node only when it carries items for it.
 *
 * Queues that move to a node whose loop is parked (or back to a parked main loop) are
 * polled at once by a top-up call of that loop (lease-loop.ts, `joined`): a parked call
 * is never aborted, since the node might hand it deliveries as it ends. This is what lets
 * a queue whose partition moved (the relocated hint) be served by its new owner at once
 * even when the worker already polls that owner.
 */
import { WorkerService, type LeaseResponse } from "../gen/conveyor/v1/worker_service_pb.js";
import type { RpcChannel } from "../rpc/client.js";
import type { UnaryClient } from "../rpc/service-definition.js";
import { LeaseLoop, type LeaseBase, type LeaseQueue } from "./lease-loop.js";
import { MAIN, QueuePlacement } from "./queue-placement.js";
import { leaseShare, SlotBudget } from "./slot-budget.js";
import { messageOf, type WorkerLogger } from "./worker-log.js";

type WorkerRpc = UnaryClient<typeof WorkerService>;

export interface LeaseLoopsDeps {
  workerId: string;
  queues: LeaseQueue[];
  concurrency: number;
  leaseWaitMs: number;
  base: LeaseBase;
  /** The worker's configured node. */
  main: { address: string; rpc: WorkerRpc };
  /** A channel to another node, with the worker's token and TLS options. */
  connect(address: string): RpcChannel;
  /** Whether its calls go on a session (the worker's `sessions` option). */
  sessions: boolean;
  /** Deliveries being handled now. */
  running(): number;
  signal: AbortSignal;
  log: WorkerLogger;
  report(error: unknown, context: string): void;
  pause(ms: number): Promise<void>;
  /** Runs an answer's deliveries (each takes a slot at once). */
  deliver(res: LeaseResponse): void;
}

interface OtherNode {
  loop: LeaseLoop;
  channel: RpcChannel;
  rpc: WorkerRpc;
  done: Promise<void>;
}

export class LeaseLoops {
  readonly slots: SlotBudget;
  private readonly placement: QueuePlacement<LeaseQueue>;
  private readonly mainLoop: LeaseLoop;
  private readonly others = new Map<string, OtherNode>();

  constructor(private readonly deps: LeaseLoopsDeps) {
    this.slots = new SlotBudget(deps.concurrency, deps.running);
    this.placement = new QueuePlacement(deps.queues, deps.main.address);
    this.mainLoop = this.newLoop(deps.main.address, deps.main.rpc, true);
  }

  /** Whether any Lease call was made (a worker that never reached a node has nothing to fence). */
  get everLeased(): boolean {
    return this.mainLoop.everLeased || [...this.others.values()].some((o) => o.loop.everLeased);
  }

  /** Addresses of the other nodes polled now (for tests and logs). */
  get nodes(): string[] {
    return [...this.others.keys()];
  }

  /** Leases until the worker's signal aborts; resolves once every loop has ended. */
  async run(): Promise<void> {
    await this.mainLoop.run();
    await Promise.all([...this.others.values()].map((o) => o.done));
  }

  /** The draining Settle (no items) to every other node polled: see the header. */
  async fence(): Promise<void> {
    const polled = [...this.others.values()].filter((o) => o.loop.everLeased);
    await Promise.all(polled.map((o) =>
      o.rpc.settle({ workerId: this.deps.workerId, settlements: [], workerDraining: true }, { timeoutMs: 10_000 })
        .catch((error: unknown) => this.deps.report(error, "settle"))));
  }

  /** Closes the channels to other nodes (the main one is the worker's). */
  close(): void {
    for (const o of this.others.values()) o.channel.close();
    this.others.clear();
  }

  private newLoop(address: string, rpc: WorkerRpc, main: boolean): LeaseLoop {
    const key = main ? MAIN : address;
    const { deps } = this;
    return new LeaseLoop(address, rpc, main, {
      base: deps.base, standing: () => deps.sessions && this.pollingLoops() <= 1, leaseWaitMs: deps.leaseWaitMs, slots: this.slots, signal: deps.signal, log: deps.log, report: deps.report, pause: deps.pause,
      queues: () => this.placement.queuesOf(key),
      share: (loop, free) => this.share(loop, free),
      pollOwners: () => !this.placement.anyCoolingDown(Date.now()),
      answered: (loop, res) => this.answered(key, res),
      handBack: (loop, error) => this.handBack(loop, error),
    });
  }

  private share(loop: LeaseLoop, free: number): number {
    const loops = this.polling();
    return leaseShare(free, loops.length, loops.filter((l) => !l.parked).length, loop.lastAnswerEmpty);
  }

  /** The loops that poll some queues now. */
  private polling(): LeaseLoop[] {
    return this.loops().filter((l) => !l.ended && this.placement.queuesOf(l.main ? MAIN : l.address).length > 0);
  }

  /** How many loops poll some queues now: a standing call is asked for only while one does (lease-loop.ts). */
  private pollingLoops(): number {
    return this.polling().length;
  }

  private answered(key: string, res: LeaseResponse): void {
    if (key !== MAIN) this.placement.reached(key);
    this.deps.deliver(res);
    if (res.routes.length > 0 && this.placement.route(key, res.routes, Date.now())) {
      this.startLoops();
      this.mainLoop.wake(); // a route may name the main node (its queues come back to it)
      for (const l of this.loops()) l.joined(); // loops already parked poll their new queues now
    }
  }

  /** A loop on every address that has queues and none running. */
  private startLoops(): void {
    if (this.deps.signal.aborted) return;
    for (const address of this.placement.addresses()) {
      const existing = this.others.get(address);
      if (existing && !existing.loop.ended) continue;
      existing?.channel.close();
      const channel = this.deps.connect(address);
      const rpc = channel.service(WorkerService, { session: this.deps.sessions });
      const loop = this.newLoop(address, rpc, false);
      const other: OtherNode = { loop, channel, rpc, done: Promise.resolve() };
      this.others.set(address, other);
      this.deps.log.info(`polling the node at ${address} for queues ${this.placement.queuesOf(address).map((q) => q.queue).join(", ")} (their owner)`);
      other.done = loop.run().finally(() => {
        // Ended without the worker stopping (its queues left): nothing to fence there later.
        if (this.deps.signal.aborted || this.others.get(address) !== other) return;
        this.others.delete(address);
        channel.close();
      });
    }
  }

  private handBack(loop: LeaseLoop, error: unknown): void {
    const queues = this.placement.queuesOf(loop.address).map((q) => q.queue);
    this.deps.report(error, "lease");
    this.deps.log.warn(`the node at ${loop.address} cannot serve queues ${queues.join(", ")} (${messageOf(error)}); polling them through ${this.deps.main.address} again`);
    this.placement.handBack(loop.address, Date.now());
    this.mainLoop.wake();
    this.mainLoop.joined();
  }

  private loops(): LeaseLoop[] {
    return [this.mainLoop, ...[...this.others.values()].map((o) => o.loop)];
  }
}
