/**
 * A cluster member's side of the shared-rule ledgers: rounds of reports, each carrying
 * every shared slot of this node to the node that holds its rule's ledger, and applying
 * the grants that come back (a raised grant wakes the queues waiting on the slot).
 *
 * Every round reports to every member, an empty report included: a fresh ledger must hear
 * from every member before it grants anything (a node it never heard of might hold
 * grant). An empty report that would tell a member nothing new is left out: the same
 * members, the same ledger partitions at the same epochs, and answered less than
 * QUIET_REPORT_MAX_MS ago. A node with no shared slots in use thus costs each member a
 * call every few seconds instead of four a second, while any change (a ledger that moved,
 * a member that came or went) is reported in the next round. Rounds run one at a time (a reply is applied before the next report is built,
 * which the ledger's arithmetic relies on), every `intervalMs`, and at once when a queue
 * starts holding tasks on a shared slot, so a grant costs one round trip, not an interval.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import type { Clock } from "../../base/clock.js";
import type { Ownership } from "../../cluster/ownership.js";
import type { SlotGrant, SlotReport } from "../../grains/ledger/grant-ledger.js";
import type { NodeGrants } from "../../grains/ledger/node-grants.js";
import type { SharedSlotLedger } from "../../grains/runtime/shared-slots.js";
import { ClusterService } from "../../gen/conveyor/v1/cluster_service_pb.js";
import type { Peers } from "../forwarding/peers.js";
import { ledgerPartitionOf, type LedgerHost, type SlotsReport } from "./ledger-host.js";

/** How often every member reports to every other one (grants also move at once on demand). */
export const GRANT_ROUND_INTERVAL_MS = 250;
/** The longest an unchanged empty report is left out (a ledger that lost track of this node hears from it again). */
export const QUIET_REPORT_MAX_MS = 5_000;
/** A report not answered within this is given up (its grant is not applied; the ledger may count it). */
const REPORT_TIMEOUT_MS = 2_000;

const reportSlots = (ClusterService.methods as DescMethod[]).find((m) => m.name === "ReportSlots")!;

export interface GrantExchangeDeps {
  ownership: Ownership;
  grants: NodeGrants;
  shared: SharedSlotLedger;
  host: LedgerHost;
  peers: Peers;
  /** The other members' gRPC addresses. */
  others: () => Array<{ nodeId: string; address: string }>;
  clock: Clock;
  logger: Logger;
}

export class GrantExchange {
  private seq = 0;
  private running = false;
  private again = false;
  private stopped = false;
  private cancelTimer: (() => void) | undefined;
  /** The round running now (a farewell waits for it). */
  private current: Promise<void> | undefined;
  /** Per member: what its last answered empty report said (members, partitions, epochs) and when. */
  private readonly quiet = new Map<string, { key: string; atMs: number }>();
  /** Rounds completed (for tests and metrics). */
  rounds = 0;
  /** Reports sent to other members (for tests and metrics). */
  reportsSent = 0;

  constructor(private readonly deps: GrantExchangeDeps) {
    // Seqs must grow across restarts of this node too (a ledger remembers the last one).
    this.seq = deps.clock.nowMs() * 1000;
  }

  start(): void {
    this.schedule(GRANT_ROUND_INTERVAL_MS);
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
  }

  /**
   * The last round of a node leaving, once it has handed its queues off: every member gets
   * this node's report, empty ones included, so the ledgers drop what they counted for it
   * (a node that leaves without one, a crash, stays counted until it reports again).
   * Then no more rounds.
   */
  async farewell(): Promise<void> {
    this.stop();
    await this.current;
    try {
      await this.exchange(true, true);
    } catch (err) {
      this.deps.logger.warn({ err }, "the last shared-rule report failed; the ledgers count this node until it reports again");
    }
  }

  /** Runs a round as soon as possible (after the one running, if any). */
  soon(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.cancelTimer?.();
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    this.cancelTimer = this.deps.clock.setTimer(delayMs, () => {
      this.cancelTimer = undefined;
      void this.round();
    });
  }

  private async round(): Promise<void> {
    if (this.stopped || this.running) return;
    this.running = true;
    this.current = this.exchange();
    try {
      await this.current;
    } catch (err) {
      this.deps.logger.warn({ err }, "shared-rule grant round failed");
    } finally {
      this.running = false;
      this.rounds += 1;
      if (!this.stopped) {
        const now = this.again;
        this.again = false;
        this.schedule(now ? 0 : GRANT_ROUND_INTERVAL_MS);
      }
    }
  }

  /**
   * @param everyReport send empty reports that tell a member nothing new too (a farewell).
   * @param leaving this node admits nothing more: it reports holding only what still runs.
   */
  private async exchange(everyReport = false, leaving = false): Promise<void> {
    const { ownership, grants, shared, host, peers } = this.deps;
    this.seq += 1;
    const seq = this.seq;
    const self = ownership.nodeId;
    // Which node holds each partition's ledgers, as this node routes now.
    const partitionsOf = new Map<string, number[]>();
    for (const m of ownership.members()) partitionsOf.set(m, []);
    partitionsOf.set(self, partitionsOf.get(self) ?? []);
    const holderOf = new Map<number, string>();
    const epochs: string[] = [];
    for (let p = 0; p < ownership.partitions; p++) {
      const route = ownership.route(p);
      const holder = route.kind === "local" || route.kind === "claim" ? self : route.kind === "remote" ? route.nodeId : undefined;
      if (holder === undefined || !partitionsOf.has(holder)) continue;
      holderOf.set(p, holder);
      partitionsOf.get(holder)!.push(p);
      epochs[p] = `${holder}@${"epoch" in route ? route.epoch : 0}`;
    }
    const members = [...partitionsOf.keys()].sort().join(",");
    const slots = new Set([...shared.slots(), ...grants.knownSlots()]);
    const reports = grants.report(slots, (slot) => shared.inflightOf(slot), (slot) => shared.isWaitedOn(slot))
      .flatMap((r) => (!leaving ? [r] : r.inflight > 0 ? [{ ...r, held: r.inflight, want: r.inflight }] : []));
    const slotsOf = new Map<string, SlotReport[]>();
    for (const r of reports) {
      const holder = holderOf.get(ledgerPartitionOf(ownership, r.slot));
      if (holder === undefined) continue; // its ledger is unreachable now: keep what is held
      let list = slotsOf.get(holder);
      if (!list) slotsOf.set(holder, (list = []));
      list.push(r);
    }
    const addresses = new Map(this.deps.others().map((o) => [o.nodeId, o.address]));
    const calls = [...partitionsOf].map(async ([node, partitions]): Promise<SlotGrant[]> => {
      const request: SlotsReport = { fromNode: self, seq, partitions, slots: slotsOf.get(node) ?? [] };
      if (node === self) return (await host.report(request)).grants;
      const address = addresses.get(node);
      if (!address) return [];
      const nowMs = this.deps.clock.nowMs();
      const quietKey = request.slots.length === 0 ? `${address}|${members}|${partitions.map((p) => epochs[p]).join(",")}` : undefined;
      const last = this.quiet.get(node);
      if (!everyReport && quietKey !== undefined && last?.key === quietKey && nowMs - last.atMs < QUIET_REPORT_MAX_MS) return [];
      this.quiet.delete(node);
      this.reportsSent += 1;
      try {
        const answer = await peers.call(address, ClusterService, reportSlots, {
          fromNode: self, seq: BigInt(seq), partitions,
          slots: request.slots.map((s) => ({
            slot: s.slot, held: s.held, inflight: s.inflight, want: s.want,
            ...(s.limitSetAtMs !== undefined ? { limitSetAtMs: BigInt(s.limitSetAtMs), ...(s.limit !== undefined ? { limit: s.limit } : {}) } : {}),
          })),
        }, { from: self, route: "", deadlineMs: Date.now() + REPORT_TIMEOUT_MS }) as { grants: Array<{ slot: string; grant: number; limit?: number }> };
        if (quietKey !== undefined) this.quiet.set(node, { key: quietKey, atMs: nowMs });
        return answer.grants.map((g) => ({ slot: g.slot, grant: g.grant, limit: g.limit }));
      } catch (err) {
        this.deps.logger.debug({ err, node }, "a shared-rule report was not answered; its grants stay as they are");
        return [];
      }
    });
    const answers = await Promise.all(calls);
    for (const slot of grants.apply(answers.flat())) shared.granted(slot);
  }
}
