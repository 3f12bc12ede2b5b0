/**
 * Coalesces a producer's overlapping `enqueue` calls into EnqueueBatch calls.
 *
 * Why: a gRPC unary call costs ~0.3-0.5 ms of CPU on each side however small it is, so a
 * producer with many calls in flight is bound by calls, not tasks
 * (docs/decisions/0009-coalesced-enqueues.md). One batch of N costs about one call.
 *
 * When a call goes out (Nagle-like, never a timer):
 * - fewer than `inFlightMax` sends in flight: at the end of the event-loop turn
 *   (setImmediate), with every call of that turn. A lone call goes out as a plain
 *   Enqueue, so latency at one call in flight is what it was without coalescing;
 * - `inFlightMax` sends in flight: calls wait for one to return, then go out together in
 *   the next turn; a pending group that reaches a bound (BATCH_MAX items, or about the
 *   node's request size) goes out without waiting. The Client allows two in flight, not
 *   one: see COALESCE_IN_FLIGHT_MAX for the measurements.
 *
 * What each caller gets is what a single Enqueue would have given it:
 * - per-item outcomes of the batch go to their own callers (an invalid item fails only
 *   its caller);
 * - a whole-call refusal made before any work (`refusedBeforeWork`: the guard's scope
 *   check, the size checks) says nothing about one item, so every member is sent again
 *   alone, each getting its own answer. This is safe: the node stored nothing;
 * - any other whole-call failure (unreachable, the node stopping, INTERNAL) fails every
 *   member with it: as with a single Enqueue, whether anything was stored is not known,
 *   so sending again could store a task twice (a retry is the caller's, idempotent with
 *   its own `taskId`).
 *
 * Only calls of one `group` share a batch, for calls whose RPC options differ. The Client
 * uses one group: its enqueues share its call options (deadline, waitForReady, connect
 * timeout, token), and every EnqueueOptions field is a TaskSpec field, which a batch
 * carries per item. Order is kept within a group: a batch lists its calls in call order,
 * and a partial batch goes out only after the earlier ones did.
 */
import { ConveyorError } from "../base/errors.js";

/** How to send: one item alone, or several with one outcome each, in order. */
export interface CoalescerTransport<Item, Result> {
  one(item: Item): Promise<Result>;
  /** One outcome per item, in order: a result, or that item's error. */
  batch(items: readonly Item[]): Promise<ReadonlyArray<Result | Error>>;
  /** True when a whole-batch error was a refusal before any work (nothing stored). */
  refusedBeforeWork(error: unknown): boolean;
}

export interface CoalescerLimits<Item> {
  /** Items per batch at most (the node's BATCH_MAX). */
  countMax: number;
  /** Estimated bytes per batch at most (under the node's request size limit). */
  bytesMax: number;
  /** An item's estimated size on the wire. */
  bytesOf(item: Item): number;
  /** Sends of a group in flight at most before a partial batch waits for one to return. */
  inFlightMax: number;
}

interface Pending<Item, Result> {
  item: Item;
  bytes: number;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
}

/** One group's calls: those waiting, and how many sends are in flight. */
interface Group<Item, Result> {
  pending: Array<Pending<Item, Result>>;
  pendingBytes: number;
  inFlight: number;
  flushScheduled: boolean;
}

export class EnqueueCoalescer<Item, Result> {
  /** By group key; a Client has one key (call options), so groups are few and kept. */
  private readonly groups = new Map<string, Group<Item, Result>>();

  constructor(private readonly transport: CoalescerTransport<Item, Result>, private readonly limits: CoalescerLimits<Item>) {}

  /** Sends `item` with the other calls of its group that overlap it; resolves with its own outcome. */
  add(item: Item, groupKey = ""): Promise<Result> {
    const group = this.groupOf(groupKey);
    return new Promise<Result>((resolve, reject) => {
      const bytes = this.limits.bytesOf(item);
      group.pending.push({ item, bytes, resolve, reject });
      group.pendingBytes += bytes;
      if (group.inFlight < this.limits.inFlightMax || this.full(group)) this.schedule(groupKey, group);
    });
  }

  private groupOf(key: string): Group<Item, Result> {
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = { pending: [], pendingBytes: 0, inFlight: 0, flushScheduled: false }));
    return group;
  }

  private full(group: Group<Item, Result>): boolean {
    return group.pending.length >= this.limits.countMax || group.pendingBytes >= this.limits.bytesMax;
  }

  private schedule(key: string, group: Group<Item, Result>): void {
    if (group.flushScheduled) return;
    group.flushScheduled = true;
    setImmediate(() => this.flush(key, group));
  }

  /**
   * Sends what is pending: all of it (in chunks within the bounds) when fewer than
   * inFlightMax sends were in flight, otherwise only full chunks.
   */
  private flush(key: string, group: Group<Item, Result>): void {
    group.flushScheduled = false;
    const idle = group.inFlight < this.limits.inFlightMax;
    for (;;) {
      const chunk = this.takeChunk(group);
      if (chunk.length === 0) break;
      // A chunk is full when it reached the count bound or the bytes bound (calls remain).
      const full = chunk.length >= this.limits.countMax || group.pending.length > 0;
      if (!idle && !full) {
        // A partial batch waits for the send in flight (put back, in order).
        group.pending.unshift(...chunk);
        group.pendingBytes += chunk.reduce((n, p) => n + p.bytes, 0);
        break;
      }
      this.send(key, group, chunk);
    }
  }

  /** The longest prefix of the pending calls within the bounds (a larger single call goes alone: the node judges it). */
  private takeChunk(group: Group<Item, Result>): Array<Pending<Item, Result>> {
    let n = 0;
    let bytes = 0;
    for (const p of group.pending) {
      if (n > 0 && (n >= this.limits.countMax || bytes + p.bytes > this.limits.bytesMax)) break;
      n += 1;
      bytes += p.bytes;
    }
    group.pendingBytes -= bytes;
    return group.pending.splice(0, n);
  }

  /**
   * Sends a chunk: alone as a single call, or as a batch. The send counts as returned
   * before its callers are told, so a caller that enqueues again on its answer finds
   * nothing in flight and its call goes out in the next turn (no added latency).
   */
  private send(key: string, group: Group<Item, Result>, chunk: Array<Pending<Item, Result>>): void {
    group.inFlight += 1;
    const returned = () => {
      group.inFlight -= 1;
      if (group.pending.length > 0) this.schedule(key, group);
    };
    if (chunk.length === 1) {
      const p = chunk[0]!;
      this.transport.one(p.item).then((result) => {
        returned();
        p.resolve(result);
      }, (error: unknown) => {
        returned();
        p.reject(error);
      });
      return;
    }
    this.transport.batch(chunk.map((p) => p.item)).then((outcomes) => {
      returned();
      chunk.forEach((p, i) => {
        const outcome = outcomes[i];
        if (outcome === undefined) p.reject(new ConveyorError("INTERNAL", "INTERNAL", `the batch answer has ${outcomes.length} items for ${chunk.length} tasks`));
        else if (outcome instanceof Error) p.reject(outcome);
        else p.resolve(outcome);
      });
    }, (error: unknown) => {
      if (this.transport.refusedBeforeWork(error)) {
        // Refused as a whole, nothing stored: each call alone gets its own answer.
        for (const p of chunk) this.send(key, group, [p]);
      } else {
        for (const p of chunk) p.reject(error);
      }
      returned();
    });
  }
}
