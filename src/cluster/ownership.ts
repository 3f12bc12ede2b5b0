/**
 * Which partitions this node serves, as the router and the forwarding layer ask it.
 * Two implementations on one interface, so a single node and a cluster member run the
 * same code path: `SoloOwnership` (a ring of one: every partition here, at epoch 1) and
 * `PartitionOwners` (partition-owners.ts: claims in etcd, epochs, the watched records).
 */
import { noActiveMember } from "../base/errors.js";
import type { Route } from "./placement.js";

export interface Ownership {
  readonly nodeId: string;
  readonly partitions: number;
  /** The ring version routes are computed with (the etcd revision of the last membership change). */
  readonly ringVersion: number;
  partitionOf(queue: string): number;
  /** Where partition `p` is served, as this node sees it now. */
  route(p: number): Route;
  /**
   * Resolves with p's epoch once this node holds p, claiming it when the placement rules
   * say this node should; rejects with the caller's error otherwise (OWNER_DOWN, FENCED,
   * NO_ACTIVE_MEMBER) or resolves `undefined` when another node holds it (route again).
   */
  acquire(p: number): Promise<number | undefined>;
  /** Does this node hold p now and may it acknowledge writes for it? Synchronous: the router's check. */
  holds(p: number): boolean;
  /** Reads the partition records again (after a peer answered WRONG_OWNER). */
  refresh(): Promise<void>;
  /** The members that serve calls (active or draining), sorted; this node alone when single. */
  members(): string[];
  /** Resolves when partition `p` is not being handed off by this node, or after `timeoutMs`: true if no move is in progress any more. */
  whenMoved(p: number, timeoutMs: number): Promise<boolean>;
}

/** A single node: every partition is served here, always, at epoch 1 (ring version 1). */
export class SoloOwnership implements Ownership {
  readonly ringVersion = 1;
  constructor(readonly nodeId: string, readonly partitions: number, private readonly partitionOfQueue: (queue: string) => number) {}

  partitionOf(queue: string): number {
    return this.partitionOfQueue(queue);
  }

  route(p: number): Route {
    return { kind: "local", p, epoch: 1 };
  }

  acquire(): Promise<number> {
    return Promise.resolve(1);
  }

  holds(): boolean {
    return true;
  }

  async refresh(): Promise<void> {}

  members(): string[] {
    return [this.nodeId];
  }

  whenMoved(): Promise<boolean> {
    return Promise.resolve(true);
  }
}

/**
 * A cluster member's ownership before and after it has joined: the services are built
 * before the node registers (the member record advertises the bound ports), so until the
 * join completes nothing is held here and every call is answered "joining; retry".
 */
export class OwnershipLink implements Ownership {
  private target: Ownership | undefined;
  private onLinked: () => void = () => {};
  /** Resolves once the node has joined and its ownership is linked. */
  readonly linked = new Promise<void>((resolve) => (this.onLinked = resolve));

  constructor(readonly nodeId: string, readonly partitions: number, private readonly partitionOfQueue: (queue: string) => number) {}

  link(target: Ownership): void {
    this.target = target;
    this.onLinked();
  }

  get ringVersion(): number {
    return this.target?.ringVersion ?? 0;
  }

  partitionOf(queue: string): number {
    return this.partitionOfQueue(queue);
  }

  route(p: number): Route {
    return this.target?.route(p) ?? { kind: "none", p };
  }

  acquire(p: number): Promise<number | undefined> {
    return this.target ? this.target.acquire(p) : Promise.reject(noActiveMember(`partition ${p} (this node is still joining the cluster)`));
  }

  holds(p: number): boolean {
    return this.target?.holds(p) ?? false;
  }

  async refresh(): Promise<void> {
    await this.target?.refresh();
  }

  members(): string[] {
    return this.target?.members() ?? [];
  }

  whenMoved(p: number, timeoutMs: number): Promise<boolean> {
    return this.target ? this.target.whenMoved(p, timeoutMs) : Promise.resolve(true);
  }
}
