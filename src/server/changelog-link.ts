/**
 * A cluster member's changelog (cluster part 2, `cluster_nats`): the JetStream log opened
 * at start, the TurnJournal that puts every committed grain turn on its partition's log,
 * and the seams the node plugs it into:
 * - the group commit (Database: commit, rollback, undone writes) tells the journal which
 *   recorded turns happened;
 * - the grains' `onApplied` hook records each turn's effects (change-record.ts encodes them);
 * - `durable(queues)` is what a call awaits before it answers: the SQLite commit, then the
 *   log's acknowledgement of every turn of those queues' partitions so far;
 * - the partition owners' log gate: a claimed partition is served only once its log is
 *   fenced by this node, and a released one is closed.
 *
 * The node waits at start (bounded) until NATS answers: a member that cannot write its
 * log could acknowledge nothing.
 */
import type { Logger } from "pino";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { Clock } from "../base/clock.js";
import { ConveyorError } from "../base/errors.js";
import type { PartitionLogGate } from "../cluster/partition-owners.js";
import { encodeTurn } from "../changelog/change-record.js";
import { ChangeLogConfigError, type ChangeLog } from "../changelog/changelog.js";
import type { SnapshotStore } from "../changelog/snapshot-store.js";
import { TurnJournal } from "../changelog/turn-journal.js";
import type { Effect } from "../grains/queue/effects.js";
import type { Database } from "../storage/database.js";
import type { LogPositions } from "../storage/log-positions.js";
import type { PartitionRows } from "../storage/partition-rows.js";
import type { TaskStore } from "../storage/task-store.js";
import { LogCatchUp } from "./log-catch-up.js";
import { PartitionSnapshots } from "./partition-snapshots.js";
import { StandbyFollowers, type StandbyPlacement } from "./standby-followers.js";

/** How long a starting node keeps trying to reach NATS before it gives up. */
const CONNECT_WITHIN_MS = 30_000;

export interface ChangelogLink {
  /** The log gate for the partition owners. */
  gate: PartitionLogGate;
  /** Records a grain turn (the grains' onApplied hook). */
  record(queue: string, effects: readonly Effect[]): void;
  /** Resolves once every write so far is committed and, for these queues' partitions, on the log. */
  durable(queues: readonly string[]): Promise<void>;
  /** The sequence of p's last entry on the log as this node holds it (what a handoff's snapshot is at); 0 when p is not open here. */
  lastSeq(p: number): number;
  /**
   * Starts keeping warm copies of the partitions the placement makes this node a standby
   * of; returns what to call after every change of the members or the records.
   */
  startStandbys(placement: StandbyPlacement, count: number): () => void;
  /** Resolves if p's log answers a read from this node within LOG_ANSWER_WAIT_MS; rejects UNAVAILABLE / LOG_UNAVAILABLE otherwise (a handoff's receiver asks). */
  answers(p: number): Promise<void>;
  /** The log's health and every partition's log facts as this node knows them (GetClusterStatus). */
  status(withLog: boolean): Promise<ChangelogView>;
  /**
   * Gives the link what drops the node's grains of a partition from memory (the grain host
   * exists after the link): called before the partition's rows are brought to the log (a
   * claim, a standby's start) and when this node loses its log (log-catch-up.ts says why).
   */
  linkGrains(retirePartition: (p: number) => void): void;
  close(): Promise<void>;
}

/** What GetClusterStatus shows of the changelog (cluster-status.ts puts it on the wire). */
export interface ChangelogView {
  healthy: boolean;
  stream: string;
  leader: string;
  error: string;
  standbyPartitions: number;
  standbyLagEntries: number;
  /** Indexed by partition; empty until the node has joined. */
  partitions: Array<{ standbys: string[]; logLastSeq: number; standbySeq: number; standbyLagEntries: number }>;
}

/** How long a status call waits for the log to name its leader. */
const STATUS_LOG_WAIT_MS = 2_000;
/** How long a handoff's receiver waits for its log to answer before it refuses the handoff (the sender's calls wait meanwhile). */
const LOG_ANSWER_WAIT_MS = 1_000;

export interface ChangelogSettings {
  /** `cluster_nats`: NATS URLs, comma-separated. */
  urls: string;
  nodeId: string;
  partitionOf(queue: string): number;
  db: Database;
  /** What a claim's catch-up applies the log's entries with, and where it records how far it got. */
  store: TaskStore;
  rows: PartitionRows;
  positions: LogPositions;
  /** `cluster_snapshot_every`: turns appended to a partition between its snapshots (0: none). */
  snapshotEvery: number;
  clock: Clock;
  logger: Logger;
  registry: Registry;
}

/** The NATS URLs of a `cluster_nats` value (a bare host:port gets nats://). */
export function parseNatsUrls(value: string): string[] {
  return value.split(",").map((u) => u.trim()).filter(Boolean).map((u) => (/^[a-z]+:\/\//.test(u) ? u : `nats://${u}`));
}

/** Opens the changelog named by `cluster_nats`; undefined when it names none. */
export async function openChangelog(settings: ChangelogSettings): Promise<ChangelogLink | undefined> {
  const servers = parseNatsUrls(settings.urls);
  if (servers.length === 0) return undefined;
  const { clock, logger } = settings;
  const { log, snapshotStore } = await openWithin(`cluster_nats ${servers.join(",")}`, clock, logger, async () => {
    // Loaded here: a single node never needs the NATS client (~0.1 s of start-up).
    const { JetStreamChangeLog } = await import("../changelog/jetstream-change-log.js");
    const opened = await JetStreamChangeLog.open({ servers, connectionName: `conveyord ${settings.nodeId}` });
    try {
      return { log: opened, snapshotStore: await opened.openSnapshotStore() };
    } catch (err) {
      await opened.close().catch(() => {});
      throw err;
    }
  });
  logger.info({ servers, stream: log.stream }, "changelog open");
  return linkChangelog(settings, log, snapshotStore);
}

/**
 * The link on an open log and snapshot store: what `openChangelog` returns once
 * JetStream answers. Separate so that a simulation can run the node's own wiring on the
 * in-memory log and store (test/property/changelog-failover.property.test.ts).
 */
export function linkChangelog(settings: Omit<ChangelogSettings, "urls">, log: ChangeLog, snapshotStore: SnapshotStore): ChangelogLink {
  const { db, clock, logger } = settings;
  const metrics = changelogMetrics(settings.registry);
  // Set once the snapshots exist (they need the journal): each acknowledged turn counts towards the next snapshot.
  let appendedListener: (p: number) => void = () => {};
  let retireGrains: (p: number) => void = () => {};
  const journal = new TurnJournal({
    log, nodeId: settings.nodeId, partitionOf: settings.partitionOf, now: () => clock.nowMs(),
    events: {
      appended: (p, _turns, ms) => {
        metrics.appendSeconds.observe(ms / 1000);
        appendedListener(p);
      },
      failed: (p, reason) => {
        metrics.failures.inc({ reason });
        logger.warn({ partition: p, reason }, "changelog append failed; re-reading the partition's log before appending again");
      },
      recovered: (p, reappended) => logger.info({ partition: p, reappended }, "changelog partition recovered"),
      closed: (p, why) => {
        logger.info({ partition: p, why }, "changelog partition closed on this node");
        retireGrains(p);
      },
    },
  });
  const catchUp = new LogCatchUp({
    log, db, store: settings.store, rows: settings.rows, positions: settings.positions, snapshots: snapshotStore, partitionOf: settings.partitionOf, logger,
    retireGrains: (p) => retireGrains(p),
  });
  const snapshots = new PartitionSnapshots({
    journal, rows: settings.rows, store: snapshotStore, log, partitionOf: settings.partitionOf, every: settings.snapshotEvery, logger,
    events: {
      taken: (_p, _seq, bytes, ms) => {
        metrics.snapshotSeconds.observe(ms / 1000);
        metrics.snapshotBytes.observe(bytes);
      },
      purged: (_p, entries) => metrics.purged.inc(entries),
      failed: () => metrics.snapshotFailures.inc(),
    },
  });
  appendedListener = (p) => snapshots.appended(p, 1);
  db.onCommit(() => journal.committed());
  db.onRollback(() => journal.rolledBack());
  db.onUndo((writeId) => journal.undone(writeId));
  let standbys: StandbyFollowers | undefined;
  let standbyPlacement: { placement: StandbyPlacement; count: number } | undefined;
  /** Partitions whose log a claim is opening now. */
  const opening = new Set<number>();
  new Gauge({ name: "conveyor_changelog_standby_partitions", help: "Partitions this node keeps a warm copy of (follows their changelog as a standby).", registers: [settings.registry],
    collect() { this.set(standbys?.partitions ?? 0); } });
  new Gauge({ name: "conveyor_changelog_standby_lag_entries", help: "Changelog entries this node's standby followers have still to apply, summed over the partitions they follow.", registers: [settings.registry],
    collect() { this.set(standbys?.lag ?? 0); } });
  return {
    gate: {
      isOpen: (p, epoch) => journal.isOpen(p, epoch),
      open: async (p, epoch) => {
        const mark = new TextEncoder().encode(JSON.stringify({ node: settings.nodeId, epoch, atMs: clock.nowMs() }));
        // A standby's follower of p stops first, and none starts again while this node opens
        // or holds p's log (`writes`): from here on only the claim touches p's rows.
        opening.add(p);
        const resume = (await standbys?.pause(p)) ?? (() => {});
        try {
          // Before the fence, the rows here catch up with whatever the log acknowledged (a
          // takeover: the previous owner's turns, or a standby's lag; a handoff: usually nothing).
          await journal.openPartition(p, epoch, mark, async (lastSeq) => {
            const caughtUp = await catchUp.to(p, lastSeq);
            if (caughtUp.entries > 0 || caughtUp.rebuilt) {
              metrics.catchUpSeconds.observe(caughtUp.ms / 1000);
              metrics.catchUpEntries.inc(caughtUp.entries);
            }
          });
          // From here on this node's own turns reach its file before the log: its rows of p
          // are no longer known to equal the log (a crash now means a rebuild at the next claim).
          settings.positions.clear(p);
          metrics.fences.inc();
        } finally {
          opening.delete(p);
          resume();
        }
      },
      close: (p, why) => journal.closePartition(p, why),
    },
    record: (queue, effects) => journal.record(queue, encodeTurn(queue, effects), db.writeId),
    durable: async (queues) => {
      await db.committed();
      const partitions = new Set(queues.map((q) => settings.partitionOf(q)));
      await Promise.all([...partitions].map((p) => journal.flushed(p)));
    },
    lastSeq: (p) => journal.lastSeq(p) ?? 0,
    startStandbys: (placement, count) => {
      standbys = new StandbyFollowers({ log, catchUp, placement, count, logger, writes: (p) => opening.has(p) || journal.isOpen(p) });
      standbyPlacement = { placement, count };
      standbys.refresh();
      return () => standbys?.refresh();
    },
    status: async (withLog) => {
      const within = <T>(p: Promise<T>) => Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${STATUS_LOG_WAIT_MS} ms`)), STATUS_LOG_WAIT_MS).unref())]);
      let leader = "";
      let error = "";
      try {
        leader = await within(log.leader());
        if (leader === "") error = "the stream has no leader now";
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
      }
      const partitions = standbyPlacement?.placement.partitions ?? 0;
      const lastSeqs = withLog && error === ""
        ? await Promise.all(Array.from({ length: partitions }, (_, p) => within(log.lastSeq(p)).catch(() => 0)))
        : [];
      return {
        healthy: error === "", stream: log.stream, leader, error, standbyPartitions: standbys?.partitions ?? 0, standbyLagEntries: standbys?.lag ?? 0,
        partitions: Array.from({ length: partitions }, (_, p) => {
          const lag = standbys?.lagOf(p);
          return {
            standbys: standbyPlacement!.placement.standbys(p, standbyPlacement!.count), logLastSeq: lastSeqs[p] ?? 0,
            standbySeq: lag === undefined ? 0 : settings.positions.get(p) ?? 0, standbyLagEntries: lag ?? 0,
          };
        }),
      };
    },
    linkGrains: (retirePartition) => {
      retireGrains = retirePartition;
    },
    answers: async (p) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([log.lastSeq(p), new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new ConveyorError("UNAVAILABLE", "LOG_UNAVAILABLE",
            `partition ${p}'s changelog did not answer this node within ${LOG_ANSWER_WAIT_MS} ms; retry`)), LOG_ANSWER_WAIT_MS);
        })]);
      } finally {
        clearTimeout(timer);
      }
    },
    close: async () => {
      await standbys?.stop();
      journal.closeAll("the node stopped");
      await log.close();
    },
  };
}

/**
 * Runs `open` (connect, and create the log's stream and the snapshots' bucket if missing)
 * until it works, retrying for CONNECT_WITHIN_MS: nodes and NATS may start in any order,
 * and creating a stream on a fresh or busy JetStream cluster can time out (three nodes
 * starting at once on the loaded test machine saw the bucket's creation time out, and the
 * node exited with "timeout" when only the connection was retried). A server set up wrong
 * (ChangeLogConfigError) is refused at once.
 */
export async function openWithin<T>(what: string, clock: Clock, logger: Pick<Logger, "warn">, open: () => Promise<T>, withinMs = CONNECT_WITHIN_MS): Promise<T> {
  const deadline = clock.nowMs() + withinMs;
  for (;;) {
    try {
      return await open();
    } catch (err) {
      if (err instanceof ChangeLogConfigError) throw err;
      if (clock.nowMs() >= deadline) {
        throw new Error(`cannot open the changelog on ${what} within ${withinMs / 1000}s: ${err instanceof Error ? err.message : String(err)}`);
      }
      logger.warn({ err, what }, "cannot reach the changelog (NATS JetStream) yet; retrying");
      await new Promise<void>((r) => clock.setTimer(1_000, r));
    }
  }
}

function changelogMetrics(registry: Registry) {
  const registers = [registry];
  return {
    appendSeconds: new Histogram({
      name: "conveyor_changelog_append_seconds", help: "Time from a committed turn's hand-over to the changelog to its acknowledgement by a JetStream quorum.",
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers,
    }),
    failures: new Counter({
      name: "conveyor_changelog_append_failures_total", help: "Changelog appends that failed, by reason (fenced, timeout, no_quorum, unavailable).", labelNames: ["reason"] as const, registers,
    }),
    fences: new Counter({ name: "conveyor_changelog_fences_total", help: "Partition logs this node fenced (one per claim).", registers }),
    catchUpSeconds: new Histogram({
      name: "conveyor_changelog_catch_up_seconds", help: "Time a claim spent applying the partition's changelog to this node's rows before serving it (takeovers, rebuilds).",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers,
    }),
    snapshotSeconds: new Histogram({
      name: "conveyor_changelog_snapshot_seconds", help: "Time to take and store a partition snapshot (read, seal, put in the object store).",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers,
    }),
    snapshotBytes: new Histogram({
      name: "conveyor_changelog_snapshot_bytes", help: "Size of the partition snapshots this node stored.",
      buckets: [16e3, 64e3, 256e3, 1e6, 4e6, 16e6, 64e6, 256e6], registers,
    }),
    snapshotFailures: new Counter({ name: "conveyor_changelog_snapshot_failures_total", help: "Partition snapshots that could not be taken or stored (tried again after the next appends).", registers }),
    purged: new Counter({ name: "conveyor_changelog_purged_entries_total", help: "Changelog entries purged below a partition's previous snapshot.", registers }),
    catchUpEntries: new Counter({ name: "conveyor_changelog_catch_up_entries_total", help: "Changelog entries applied by claims' catch-ups.", registers }),
  };
}
