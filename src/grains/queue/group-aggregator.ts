/**
 * Group aggregation for one queue: the members of each group waiting to fire, and the
 * fire rule. Pure: time is passed in.
 *
 * A group fires at a sweep when any threshold trips: it holds at least `maxSize`
 * members, its first member is `maxDelayMs` old, or its last member is `graceMs` old
 * (the debounce, reset by every new member). A fire takes at most `maxSize` members,
 * oldest first; the rest wait for the next sweep.
 */

/** The thresholds of one group, after resolution (group → queue default → server). */
export interface GroupConfig {
  maxSize: number;
  maxDelayMs: number;
  graceMs: number;
}

interface GroupState {
  type: string;
  /** Member ids in arrival order. */
  members: string[];
  memberSet: Set<string>;
  firstAtMs: number;
  lastAtMs: number;
}

export interface GroupView {
  group: string;
  type: string;
  size: number;
  firstAtMs: number;
  lastAtMs: number;
}

export interface Fire {
  group: string;
  type: string;
  memberIds: string[];
}

export class GroupAggregator {
  private readonly groups = new Map<string, GroupState>();

  get size(): number {
    return this.groups.size;
  }

  /** The type a group is bound to while it has members. */
  typeOf(group: string): string | undefined {
    return this.groups.get(group)?.type;
  }

  add(group: string, type: string, id: string, atMs: number): void {
    let state = this.groups.get(group);
    if (!state) {
      state = { type, members: [], memberSet: new Set(), firstAtMs: atMs, lastAtMs: atMs };
      this.groups.set(group, state);
    }
    state.members.push(id);
    state.memberSet.add(id);
    state.lastAtMs = Math.max(state.lastAtMs, atMs);
    state.firstAtMs = Math.min(state.firstAtMs, atMs);
  }

  /** Removes a member (cancelled, archived, deleted before its group fired). */
  remove(group: string, id: string): void {
    const state = this.groups.get(group);
    if (!state || !state.memberSet.delete(id)) return;
    state.members = state.members.filter((m) => m !== id);
    if (state.members.length === 0) this.groups.delete(group);
  }

  /**
   * The groups that fire at `nowMs`, each with at most its max size of members (which
   * leave the aggregator). `arrivalOf` gives a member's arrival time, so the first
   * member's age is right after a partial fire.
   */
  sweep(nowMs: number, configOf: (group: string) => GroupConfig, arrivalOf: (id: string) => number): Fire[] {
    const fires: Fire[] = [];
    for (const [group, state] of this.groups) {
      const config = configOf(group);
      const trips = state.members.length >= config.maxSize
        || nowMs - state.firstAtMs >= config.maxDelayMs
        || nowMs - state.lastAtMs >= config.graceMs;
      if (!trips) continue;
      const taken = state.members.splice(0, config.maxSize);
      for (const id of taken) state.memberSet.delete(id);
      fires.push({ group, type: state.type, memberIds: taken });
      if (state.members.length === 0) this.groups.delete(group);
      else state.firstAtMs = arrivalOf(state.members[0]!);
    }
    return fires;
  }

  /** When a group fires by time alone (ignoring size), for display. */
  static fireAtMs(view: GroupView, config: GroupConfig): number {
    return Math.min(view.firstAtMs + config.maxDelayMs, view.lastAtMs + config.graceMs);
  }

  list(): GroupView[] {
    return [...this.groups].map(([group, s]) => ({ group, type: s.type, size: s.members.length, firstAtMs: s.firstAtMs, lastAtMs: s.lastAtMs }));
  }
}
