/**
 * Group aggregation for one queue: the members of each group waiting to fire, and the
 * fire rule. Pure: time is passed in.
 *
 * A group fires when any threshold trips: it holds `maxSize` members (checked the moment
 * a member arrives or the thresholds change), its first member is `maxDelayMs` old, or
 * its last member is `graceMs` old (the debounce, reset by every new member). The two
 * time thresholds make one instant, `fireAtMs`, which the caller arms as a deadline. A
 * fire takes at most `maxSize` members, oldest first; the rest stay and keep aggregating.
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

  /** The groups that have members. */
  names(): IterableIterator<string> {
    return this.groups.keys();
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

  /**
   * Removes a member (cancelled, archived, deleted before its group fired). The group's
   * first and last arrival stay as they were, so its deadline does not move.
   */
  remove(group: string, id: string): void {
    const state = this.groups.get(group);
    if (!state || !state.memberSet.delete(id)) return;
    state.members = state.members.filter((m) => m !== id);
    if (state.members.length === 0) this.groups.delete(group);
  }

  /** True when the group holds at least its max size: it fires now, whatever the time. */
  isFull(group: string, config: GroupConfig): boolean {
    return (this.groups.get(group)?.members.length ?? 0) >= config.maxSize;
  }

  /** When the group fires by time alone (max delay or grace, the earlier); undefined when it has no members. */
  fireAtMs(group: string, config: GroupConfig): number | undefined {
    const state = this.groups.get(group);
    return state && GroupAggregator.timeFireAtMs(state, config);
  }

  /**
   * Takes the group's oldest `maxSize` members out as one fire. `arrivalOf` gives a
   * member's arrival time, so the first member's age is right after a partial fire.
   */
  take(group: string, maxSize: number, arrivalOf: (id: string) => number): Fire | undefined {
    const state = this.groups.get(group);
    if (!state) return undefined;
    const taken = state.members.splice(0, maxSize);
    for (const id of taken) state.memberSet.delete(id);
    if (state.members.length === 0) this.groups.delete(group);
    else state.firstAtMs = arrivalOf(state.members[0]!);
    return { group, type: state.type, memberIds: taken };
  }

  /** The time-threshold instant of a group's first and last arrival under `config`. */
  static timeFireAtMs(view: { firstAtMs: number; lastAtMs: number }, config: GroupConfig): number {
    return Math.min(view.firstAtMs + config.maxDelayMs, view.lastAtMs + config.graceMs);
  }

  list(): GroupView[] {
    return [...this.groups].map(([group, s]) => ({ group, type: s.type, size: s.members.length, firstAtMs: s.firstAtMs, lastAtMs: s.lastAtMs }));
  }
}
