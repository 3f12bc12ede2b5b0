/**
 * Any node serves any call: this layer sits between the security guard and the bare
 * services, finds where each call belongs (rpc-routes.ts) and either serves it here or
 * forwards it, once, to the node that holds the queue's partition.
 *
 * - Here: this node claims the partition first if the placement rules say it should
 *   (ownership.acquire), then the bare service runs, which checks ownership again
 *   synchronously in the router (nothing is served on a claim this node lost meanwhile).
 * - Forwarded: the caller's request goes to the owner with the route this node used
 *   and the caller's identity as this node's guard established it (peers.ts). The
 *   owner never forwards again: if it does not hold the partition it answers
 *   WRONG_OWNER, and this node reads the partition records again and retries once. A forwarded call is answered by the owner after its own commit, so "never
 *   answer before the commit" holds wherever the owner is.
 * - Split: requests whose items name several queues are cut by owner, the parts are
 *   served concurrently, and the answers are put back in request order.
 * - Lease: a long poll naming queues on several nodes first takes what is ready on each
 *   (no waiting), local queues first; if nothing is, it parks on this node's queues (or,
 *   with none here, on the node holding most of them). Every answer names the owner of
 *   each queue held elsewhere (`routes`), and a caller that polls each owner itself
 *   (`poll_owners`, the SDK worker) gets its answer at once instead of the compromise.
 *
 * With a ring of one every route is local, so a single node runs this same code and pays
 * one route lookup per call.
 */
import { create, type DescMethod, type DescService } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { ConveyorError, noActiveMember, ownerDown, queueLabel, relocating, taskNotFound, wrongOwner } from "../../base/errors.js";
import { quote } from "../../base/limits.js";
import { QueueRouteSchema, type QueueRoute } from "../../gen/conveyor/v1/worker_service_pb.js";
import type { UnaryImpl } from "../../rpc/service-definition.js";
import type { Ownership } from "../../cluster/ownership.js";
import type { Route } from "../../cluster/placement.js";
import { partitionHint } from "../../cluster/task-ids.js";
import { identityOf } from "../security/identity.js";
import { encodeOnBehalfOf } from "../security/on-behalf-of.js";
import { FORWARDED_BY, type Peers } from "./peers.js";
import { everyWhenNoQueue, RPC_ROUTES, type EveryRoute, type ItemsRoute, type RpcRoute } from "./rpc-routes.js";

type Msg = Record<string, unknown>;

/** What a call object offers (grpc-js ServerUnaryCall, or the JSON API's stand-in). */
interface CallLike {
  request: unknown;
  metadata: { get(key: string): unknown[] };
  getDeadline?(): Date | number;
}

export interface Member {
  nodeId: string;
  address: string;
}

export interface ForwarderDeps {
  ownership: Ownership;
  peers: Peers;
  /** How long a call for a partition being handed off waits for the move (`cluster_handoff_wait`). */
  handoffWaitMs: number;
  /** Counts for the metrics: calls forwarded, and forwarded calls refused WRONG_OWNER here; by method name. */
  observe?: { forwarded(method: string): void; wrongOwner(method: string): void };
  /** The other members that serve calls (active or draining), for reads of every member and lookups. */
  others(): Member[];
  /**
   * Resolves once this node has joined its cluster (at once for a single node). The gRPC
   * port is bound before the join (the member record advertises it), so a client that
   * reconnects to a restarting node may call during the join: its calls wait for it
   * (up to JOIN_WAIT_MS) instead of being answered NO_ACTIVE_MEMBER (the rolling-restart
   * test found such an error surfacing to a producer).
   */
  joined?: Promise<void>;
}

/** How long a call that arrives while this node is still joining waits for the join. */
const JOIN_WAIT_MS = 10_000;

/** Deadline of a forwarded call whose caller set none. */
const FORWARD_DEADLINE_MS = 60_000;
/** Time a forwarded long poll gets beyond its own wait. */
const LONG_POLL_MARGIN_MS = 10_000;

export function forwardingService<S extends GenService<GenServiceMethods>>(service: S, impl: UnaryImpl<S>, deps: ForwarderDeps): UnaryImpl<S> {
  const handlers = impl as unknown as Record<string, (call: CallLike) => Promise<unknown>>;
  const out: Record<string, (call: CallLike) => Promise<unknown>> = {};
  for (const method of service.methods as DescMethod[]) {
    const rpc = `${service.name}/${method.name}`;
    const route = RPC_ROUTES[rpc];
    if (!route) throw new Error(`${rpc} has no route in src/server/forwarding/rpc-routes.ts`);
    const local = handlers[method.localName]!.bind(impl);
    const forwarding = new MethodForwarding(service, method, route, local, deps);
    out[method.localName] = (call) => forwarding.handle(call);
  }
  return out as unknown as UnaryImpl<S>;
}

class MethodForwarding {
  constructor(
    private readonly service: DescService,
    private readonly method: DescMethod,
    private readonly route: RpcRoute,
    private readonly local: (call: CallLike) => Promise<unknown>,
    private readonly deps: ForwarderDeps,
  ) {}

  async handle(call: CallLike): Promise<unknown> {
    if (this.route.kind !== "here" && this.deps.joined && !hasJoined.has(this.deps.joined)) await untilJoined(this.deps.joined);
    return this.routed(call);
  }

  private routed(call: CallLike): Promise<unknown> {
    const forwarded = call.metadata.get(FORWARDED_BY).length > 0;
    const request = call.request as Msg;
    const route = this.route;
    switch (route.kind) {
      case "here":
        return this.local(call);
      case "queue": {
        const queue = route.queue(request);
        const every = everyWhenNoQueue(route);
        if (queue === "" && every) return this.every(call, every, forwarded);
        // No queue: nothing to route; the service answers the bad request itself.
        if (queue === "") return this.local(call);
        return this.toOwner(call, this.deps.ownership.partitionOf(queue), queueLabel(queue), forwarded);
      }
      case "task":
        return this.task(call, route.id(request), forwarded);
      case "items":
        return forwarded ? this.localClaiming(call, route.queues(request)) : this.itemsRerouted(call, route);
      case "lease":
        return forwarded ? this.localClaiming(call, ((request["queues"] ?? []) as Msg[]).map((q) => String(q["queue"] ?? ""))) : this.lease(call);
      case "every":
        return this.every(call, route, forwarded);
    }
  }

  /**
   * A forwarded call whose items name queues: served here, after claiming the partitions
   * the placement rules give this node (the forwarder routed them here because of that).
   * Items of partitions this node may not serve fail alone, in the router (WRONG_OWNER).
   */
  private async localClaiming(call: CallLike, queues: readonly string[]): Promise<unknown> {
    const { ownership } = this.deps;
    const partitions = new Set(queues.map((q) => ownership.partitionOf(q)));
    // The sender routed these here from its view of the records; if this node's view says
    // another node holds one of them, read the records again before refusing its items.
    if ([...partitions].some((p) => ownership.route(p).kind === "remote")) await ownership.refresh().catch(() => undefined);
    for (const p of partitions) {
      const kind = ownership.route(p).kind;
      if (kind === "claim" || kind === "local") await ownership.acquire(p).catch(() => undefined);
    }
    return this.local(call);
  }

  /** Serves the call here if this node holds (or should claim) partition p, else forwards it to the holder. */
  private async toOwner(call: CallLike, p: number, what: string, forwarded: boolean): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      const route = this.deps.ownership.route(p);
      if (route.kind === "moving") {
        // Parked while this node hands the partition off; then routed to its new owner.
        if (!(await this.deps.ownership.whenMoved(p, this.deps.handoffWaitMs))) throw relocating(p);
        continue;
      }
      if (route.kind === "local" || route.kind === "claim") {
        if ((await this.deps.ownership.acquire(p)) !== undefined) {
          try {
            return await this.local(call);
          } catch (error) {
            // A handoff of the partition began while the call ran here (before its grain
            // turn): nothing was done; route it again, once, to wherever it goes now.
            if (attempt === 0 && !forwarded && error instanceof ConveyorError && (error.reason === "WRONG_OWNER" || error.reason === "RELOCATING")) continue;
            throw error;
          }
        }
        if (attempt < 2) continue; // the claim found another holder: route again
      }
      const target = this.remoteOrThrow(route, what);
      if (forwarded) {
        // The sender's view of the records says this node; read them again, once, before
        // answering WRONG_OWNER (this node's watch may not have shown a claim or release yet).
        if (attempt === 0) {
          await this.deps.ownership.refresh().catch(() => undefined);
          continue;
        }
        this.deps.observe?.wrongOwner(this.method.name);
        throw this.wrongOwner(what, route);
      }
      try {
        return await this.forward(call, call.request, target, route);
      } catch (error) {
        if (attempt === 0 && error instanceof ConveyorError && error.reason === "WRONG_OWNER") {
          await this.deps.ownership.refresh();
          continue;
        }
        // The holder this node knew is gone (it handed the partition off and exited before
        // this node's watch showed the release: found by the rolling-restart test). Read the
        // records again; if another node holds the partition now, route there, once. The
        // old holder either never got the call or handed its result on with the rows:
        // an enqueue sent again is found by its id; a settle sent again is answered OK
        // (the lease that ended the attempt is on record).
        if (attempt === 0 && error instanceof ConveyorError && error.reason === "UNREACHABLE") {
          await this.deps.ownership.refresh();
          const now = this.deps.ownership.route(p);
          if (!(now.kind === "remote" && now.nodeId === target.nodeId)) continue;
        }
        throw error;
      }
    }
  }

  private remoteOrThrow(route: Route, what: string): { nodeId: string; address: string } {
    switch (route.kind) {
      case "remote":
        return route;
      case "down":
        throw ownerDown(what, route.p, route.nodeId);
      case "none":
        throw noActiveMember(what);
      default:
        throw new ConveyorError("UNAVAILABLE", "WRONG_OWNER", `${what}: its partition ${route.p} is changing hands; retry`);
    }
  }

  private wrongOwner(what: string, route: Route): ConveyorError {
    const owner = route.kind === "remote" || route.kind === "down" ? route.nodeId : "";
    return wrongOwner(what, owner, this.deps.ownership.ringVersion);
  }

  private forward(call: CallLike, request: unknown, target: { nodeId: string; address: string }, route: Route | undefined, deadlineMs?: number): Promise<unknown> {
    const epoch = route && (route.kind === "remote" || route.kind === "local") ? route.epoch : 0;
    this.deps.observe?.forwarded(this.method.name);
    return this.deps.peers.call(target.address, this.service, this.method, request, {
      // The guard (which wraps this layer) identified the caller; the owner applies the same roles and scope.
      onBehalfOf: encodeOnBehalfOf(identityOf(call)),
      from: this.deps.ownership.nodeId,
      route: `${route?.p ?? -1}:${epoch}:${this.deps.ownership.ringVersion}`,
      deadlineMs: deadlineMs ?? this.deadlineOf(call, 0),
    });
  }

  private deadlineOf(call: CallLike, extraMs: number): number {
    const set = call.getDeadline?.();
    const ms = set instanceof Date ? set.getTime() : typeof set === "number" ? set : Infinity;
    return Number.isFinite(ms) ? ms : Date.now() + FORWARD_DEADLINE_MS + extraMs;
  }

  /**
   * By task id: the partition the id names, when it names one; then every other member
   * (a caller-chosen id, or a hint that was wrong). Each member answers only for the
   * partitions it holds (task-access.ts), so exactly one can find the task.
   */
  private async task(call: CallLike, id: string, forwarded: boolean): Promise<unknown> {
    const { ownership } = this.deps;
    if (forwarded || id === "") return this.local(call);
    const p = partitionHint(id, ownership.partitions);
    let tried: string | undefined;
    if (p !== undefined) {
      try {
        const route = ownership.route(p);
        if (route.kind === "remote") tried = route.nodeId;
        return await this.toOwner(call, p, `task ${quote(id)}`, false);
      } catch (error) {
        if (!(error instanceof ConveyorError) || error.reason !== "TASK_NOT_FOUND") throw error;
      }
    } else {
      try {
        return await this.local(call);
      } catch (error) {
        if (!(error instanceof ConveyorError) || error.reason !== "TASK_NOT_FOUND") throw error;
      }
    }
    // Ask every other member; the one that holds the task answers.
    const others = this.deps.others().filter((m) => m.nodeId !== tried);
    if (p !== undefined && tried !== undefined) {
      // The hinted owner said no; this node may hold it (a wrong hint).
      try {
        return await this.local(call);
      } catch (error) {
        if (!(error instanceof ConveyorError) || error.reason !== "TASK_NOT_FOUND") throw error;
      }
    }
    const answers = await Promise.allSettled(others.map((m) => this.forward(call, call.request, m, undefined)));
    const found = answers.find((a) => a.status === "fulfilled");
    if (found) return (found as PromiseFulfilledResult<unknown>).value;
    const failure = answers.find((a) => a.status === "rejected" && !(a.reason instanceof ConveyorError && a.reason.reason === "TASK_NOT_FOUND"));
    if (failure) throw (failure as PromiseRejectedResult).reason;
    throw taskNotFound(id);
  }

  /**
   * Items split by owner (below), then once more for the items that failed only because
   * their queue changed hands meanwhile (a handoff began after they were routed): with
   * the partition records read again, they go to the new owner. Enqueues and settles are
   * idempotent by task id and lease, so a second routing of an item is safe.
   */
  private async itemsRerouted(call: CallLike, route: ItemsRoute): Promise<unknown> {
    const first = (await this.items(call, route)) as Msg;
    const again = route.misrouted(first);
    if (again.length === 0) return first;
    await this.deps.ownership.refresh();
    const second = (await this.items(this.subCall(call, route.pick(call.request as Msg, again)), route)) as Msg;
    const count = route.queues(call.request as Msg).length;
    // Later parts win: the second routing's answers replace the misrouted items of the first.
    return route.merge([{ indexes: [...Array(count).keys()], response: first }, { indexes: again, response: second }], count);
  }

  /** Items split by owner, each part served where it belongs, answers merged in request order. */
  private async items(call: CallLike, route: ItemsRoute): Promise<unknown> {
    const { ownership } = this.deps;
    const request = call.request as Msg;
    const queues = route.queues(request);
    await this.settleMoves(queues);
    const groups = new Map<string, { indexes: number[]; p: number }>();
    queues.forEach((queue, i) => {
      const p = ownership.partitionOf(queue);
      const r = ownership.route(p);
      const key = r.kind === "remote" ? `remote:${r.nodeId}` : r.kind === "local" || r.kind === "claim" ? `p:${p}` : `bad:${p}`;
      const g = groups.get(key) ?? { indexes: [], p };
      g.indexes.push(i);
      groups.set(key, g);
    });
    // Everything here (the common case, and always in a ring of one): one call, no copy.
    if ([...groups.keys()].every((k) => k.startsWith("p:"))) {
      for (const { p } of groups.values()) await ownership.acquire(p);
      return this.local(call);
    }
    const localIndexes: number[] = [];
    const remote: Array<{ indexes: number[]; p: number }> = [];
    for (const [key, g] of groups) (key.startsWith("p:") ? localIndexes.push(...g.indexes) : remote.push(g));
    localIndexes.sort((a, b) => a - b);
    const parts = await Promise.all([
      ...(localIndexes.length > 0 ? [this.part(route, localIndexes, () => this.localPart(call, route, localIndexes, groups))] : []),
      ...remote.map((g) => this.part(route, g.indexes, async () =>
        (await this.toOwner(this.subCall(call, route.pick(request, g.indexes)), g.p, queueLabel(queues[g.indexes[0]!]!), false)) as Msg)),
    ]);
    return route.merge(parts, queues.length);
  }

  /**
   * One part of a split call. Where the answer can say so per item (EnqueueBatch), a part
   * that fails fails only its own items: the other parts are served by their owners
   * meanwhile, so failing the whole call would report their items refused when they were
   * stored (the zombie test found a batch sent to a paused node answered FENCED as a whole
   * while the node had forwarded part of it to a live owner, which stored it).
   */
  private async part(route: ItemsRoute, indexes: number[], serve: () => Promise<Msg>): Promise<{ indexes: number[]; response: Msg }> {
    try {
      return { indexes, response: await serve() };
    } catch (error) {
      if (!route.failed || !(error instanceof ConveyorError)) throw error;
      return { indexes, response: route.failed(indexes.length, error) };
    }
  }

  private async localPart(call: CallLike, route: ItemsRoute, indexes: number[], groups: Map<string, { indexes: number[]; p: number }>): Promise<Msg> {
    for (const [key, g] of groups) if (key.startsWith("p:")) await this.deps.ownership.acquire(g.p);
    return (await this.local(this.subCall(call, route.pick(call.request as Msg, indexes)))) as Msg;
  }

  /** The Lease long poll across owners (see the header). */
  private async lease(call: CallLike): Promise<unknown> {
    const { ownership } = this.deps;
    let request = call.request as Msg & { queues?: Msg[]; maxDeliveries?: number; waitMs?: number; pollOwners?: boolean };
    const queues = request.queues ?? [];
    await this.settleMoves(queues.map((q) => String(q["queue"] ?? "")));
    const here: Msg[] = [];
    const claims: number[] = [];
    const byNode = new Map<string, { target: { nodeId: string; address: string }; queues: Msg[]; route: Route }>();
    let down: Route | undefined;
    for (const q of queues) {
      const p = ownership.partitionOf(String(q["queue"] ?? ""));
      const r = ownership.route(p);
      if (r.kind === "local" || r.kind === "claim") {
        here.push(q);
        claims.push(p);
      } else if (r.kind === "remote") {
        const g = byNode.get(r.nodeId) ?? { target: r, queues: [], route: r };
        g.queues.push(q);
        byNode.set(r.nodeId, g);
      } else {
        down = r; // a queue whose owner is down has nothing to lease now
      }
    }
    if (byNode.size === 0 && (here.length > 0 || down === undefined)) {
      for (const p of claims) await ownership.acquire(p);
      return this.local(call);
    }
    if (byNode.size === 0) this.remoteOrThrow(down!, "every queue of this Lease"); // throws: only down queues
    // Queues held elsewhere: every answer below names their owners (LeaseResponse.routes),
    // and a caller that polls the owners itself is answered without waiting here.
    const routes = leaseRoutes(byNode.values());
    // One answer, made of parts from several nodes: never a standing call.
    request = { ...request, standing: false };
    if (request.pollOwners) request = { ...request, waitMs: 0 };
    return withRoutes(await this.leaseAcross(call, request, here, claims, byNode), routes);
  }

  /** The Lease of queues on several nodes, or all on one other node (see the header). */
  private async leaseAcross(call: CallLike, request: Msg & { maxDeliveries?: number }, here: Msg[], claims: number[],
    byNode: Map<string, { target: { nodeId: string; address: string }; queues: Msg[]; route: Route }>): Promise<unknown> {
    const { ownership } = this.deps;
    if (here.length === 0 && byNode.size === 1) {
      const [g] = byNode.values();
      return this.forward(call, { ...request, queues: g!.queues }, g!.target, g!.route, this.deadlineOf(call, LONG_POLL_MARGIN_MS));
    }
    // Mixed: take what is ready everywhere, local queues first, never more than asked for.
    for (const p of claims) await ownership.acquire(p);
    const max = request.maxDeliveries ?? 1;
    const deliveries: unknown[] = [];
    let first: Msg | undefined;
    const take = (response: Msg) => {
      first ??= response;
      deliveries.push(...((response["deliveries"] ?? []) as unknown[]));
    };
    if (here.length > 0) take((await this.local(this.subCall(call, { ...request, queues: here, waitMs: 0 }))) as Msg);
    for (const g of byNode.values()) {
      if (deliveries.length >= max) break;
      let answer: Msg;
      try {
        answer = (await this.forward(call, { ...request, queues: g.queues, waitMs: 0, maxDeliveries: max - deliveries.length }, g.target, g.route)) as Msg;
      } catch (error) {
        // What was taken already is leased to this caller: answer with it. Failing the call
        // would leave those tasks leased to nobody until their lease lapsed (a full lease
        // TTL of delay: the 3 → 4 scale-out test found tasks waiting 30 s when a group's
        // partition had just moved and its old holder answered WRONG_OWNER). The caller's
        // next call meets the error again if it lasts.
        if (deliveries.length > 0) break;
        throw error;
      }
      take(answer);
    }
    if (deliveries.length > 0) return { ...first, deliveries };
    // Nothing ready: park where most of the queues are.
    if (here.length > 0) return this.local(this.subCall(call, { ...request, queues: here }));
    const biggest = [...byNode.values()].sort((a, b) => b.queues.length - a.queues.length)[0]!;
    return this.forward(call, { ...request, queues: biggest.queues }, biggest.target, biggest.route, this.deadlineOf(call, LONG_POLL_MARGIN_MS));
  }

  /** Waits (bounded) for the moves of the partitions of `queues` this node is handing off, so they route to their new owner. */
  private async settleMoves(queues: readonly string[]): Promise<void> {
    const { ownership } = this.deps;
    for (const p of new Set(queues.map((q) => ownership.partitionOf(q)))) {
      if (ownership.route(p).kind === "moving" && !(await ownership.whenMoved(p, this.deps.handoffWaitMs))) throw relocating(p);
    }
  }

  /** Reads of every member, each keeping what it holds, merged. */
  private async every(call: CallLike, route: EveryRoute, forwarded: boolean): Promise<unknown> {
    const { ownership } = this.deps;
    const holds = (queue: string) => ownership.holds(ownership.partitionOf(queue));
    const mine = route.keep((await this.local(call)) as Msg, holds);
    if (forwarded) return mine;
    const theirs = await Promise.all(this.deps.others().map((m) => this.forward(call, call.request, m, undefined) as Promise<Msg>));
    return route.merge([mine, ...theirs]);
  }

  /** The call with another request (the part of a split call); everything else is the caller's. */
  private subCall(call: CallLike, request: unknown): CallLike {
    return Object.assign(Object.create(call) as CallLike, { request });
  }
}

/** Joins known to be done: calls after the join pay no timer. */
const hasJoined = new WeakSet<Promise<void>>();

/** Waits for the join, at most JOIN_WAIT_MS (then the call routes as things are, and says why it cannot be served). */
async function untilJoined(joined: Promise<void>): Promise<void> {
  if (hasJoined.has(joined)) return;
  void joined.then(() => hasJoined.add(joined));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([joined, new Promise<void>((resolve) => (timer = setTimeout(resolve, JOIN_WAIT_MS)))]);
  clearTimeout(timer);
}

/** The owner of every queue of a Lease that another node holds, for LeaseResponse.routes. */
function leaseRoutes(groups: Iterable<{ target: { nodeId: string; address: string }; queues: Msg[] }>): QueueRoute[] {
  const routes: QueueRoute[] = [];
  for (const { target, queues } of groups) {
    for (const q of queues) routes.push(create(QueueRouteSchema, { queue: String(q["queue"] ?? ""), nodeId: target.nodeId, address: target.address }));
  }
  return routes;
}

/** A Lease answer (the owner's or this node's) with the routes this node knows. */
function withRoutes(answer: unknown, routes: QueueRoute[]): unknown {
  return { ...(answer as Msg), routes };
}
