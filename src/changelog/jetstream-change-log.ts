/**
 * The ChangeLog on NATS JetStream (nats-server 2.9.10 from Debian; @nats-io/jetstream
 * 3.4.0). One stream (`CV_LOG`, file storage, R3 by default) holds every
 * partition's log, one subject per partition (`cv.log.<p>`); an entry is one message:
 * its records framed in the body (entry-frame.ts), a `Cv-Entry: fence` header for a fence.
 *
 * Fencing is JetStream's per-subject compare-and-set: every publish carries
 * `Nats-Expected-Last-Subject-Sequence`, so the stream leader refuses it (error 10071,
 * "wrong last sequence: N") unless the partition's last sequence is the expected one.
 * The client sends the header for 0 too (a partition with no entry yet).
 *
 * Caveats of this version, decided here:
 * - An acknowledged publish is stored on a quorum but not fsynced (2.9.10 has no
 *   `sync_interval`): it survives a process crash of any one server, not a simultaneous
 *   power loss of a quorum.
 * - Reads go to the stream leader (STREAM.MSG.GET, a consumer), never to "direct get"
 *   (`allow_direct` off), which a follower may answer from a stale state.
 * - A publish that timed out may still be stored later (the client may have buffered it
 *   across a reconnect): that is why such an append is `unknown`, not failed.
 * - A read the log cannot answer now (no stream leader while one is elected, a timeout,
 *   the connection down) rejects with UNAVAILABLE / LOG_UNAVAILABLE, never with the
 *   client's own error: a claim's catch-up reads the log while a caller waits, and the
 *   network fault test saw a TimeoutError of the last-sequence read reach callers as
 *   INTERNAL when the stream's leader was cut off.
 */
import { DeliverPolicy, DiscardPolicy, jetstream, JetStreamApiError, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager, type StreamConfig } from "@nats-io/jetstream";
import { connect, errors, headers, type NatsConnection } from "@nats-io/transport-node";
import { ConveyorError } from "../base/errors.js";
import { checkAppend, checkMaxEntries, checkPartition, checkSeq } from "./append-checks.js";
import { ChangeLogConfigError, NATS_MAX_PAYLOAD_REQUIRED, type AppendOutcome, type ChangeLog, type EntryKind, type Follower, type LogEntry } from "./changelog.js";
import { frameRecords, unframeRecords } from "./entry-frame.js";
import { JetStreamSnapshotStore, type JetStreamSnapshotStoreOptions } from "./jetstream-snapshot-store.js";

export interface JetStreamChangeLogOptions {
  /** NATS URLs (`nats://host:port`); the client fails over between them. */
  servers: string[];
  /** The stream's name (default CV_LOG). */
  stream?: string;
  /** Partition p's subject is `<subjectPrefix>.<p>` (default cv.log). */
  subjectPrefix?: string;
  /** The stream's replicas when this client creates it (default 3). */
  replicas?: number;
  /** How long an append waits for its acknowledgement before it is `unknown` (default 2 s). */
  appendTimeoutMs?: number;
  /** How long a purge, stream or snapshot request waits (default 5 s). */
  requestTimeoutMs?: number;
  /**
   * How long a read or last-sequence request waits (default 2 s). Shorter than other
   * requests: each is one small message from the stream leader, and a writer that lost
   * its leader re-reads the tail before it serves again, so while a new leader is elected
   * a read sent to the old one should give up soon and ask again (the stream-leader test
   * paused up to 12.6 s with 5 s reads, the election itself 4.7-8.8 s).
   */
  readTimeoutMs?: number;
  /** The connection's name, as the server's monitoring shows it. */
  connectionName?: string;
}

export { ChangeLogConfigError };

const ENTRY_HEADER = "Cv-Entry";
/** The entry's predecessor (its append's expected last sequence), so readers see a gap. */
const PREV_HEADER = "Cv-Prev";
/** How often the connection pings its server, and how many unanswered pings make it go to another. */
const PING_INTERVAL_MS = 2_000;
const MAX_PINGS_OUT = 2;
/** How long one connection attempt to a server may take (dial, INFO, CONNECT). */
const CONNECT_TIMEOUT_MS = 2_000;
/** JetStream API error codes this file acts on (nats-server's errors.json). */
const WRONG_LAST_SEQUENCE = 10071;

export class JetStreamChangeLog implements ChangeLog {
  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    /** The same API with the shorter read timeout (`readTimeoutMs`). */
    private readonly reads: JetStreamManager,
    readonly stream: string,
    private readonly subjectPrefix: string,
    private readonly appendTimeoutMs: number,
    private readonly requestTimeoutMs: number,
  ) {}

  /** Connects and creates the stream if it is missing (an existing one must hold the same subjects). */
  static async open(options: JetStreamChangeLogOptions): Promise<JetStreamChangeLog> {
    const requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
    const nc = await connect({
      servers: options.servers,
      name: options.connectionName ?? "conveyor-changelog",
      // A leader change or a server restart must never end the connection for good.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      // A server that stops answering without closing the connection (cut off by a network
      // partition, or paused) is left for another after 2-3 unanswered pings, 4-6 s, not
      // NATS' default 2 min ping interval: the network fault test found a node whose
      // connection went to the cut-off machine's server unable to append, or to take over
      // that machine's partitions, for as long as the partition lasted. The client tries
      // that server once more first (its list is a rotation), so a connection attempt is
      // bounded too: 2 s rather than the request timeout.
      pingInterval: PING_INTERVAL_MS,
      maxPingOut: MAX_PINGS_OUT,
      timeout: CONNECT_TIMEOUT_MS,
    });
    try {
      const maxPayload = nc.info?.max_payload ?? 0;
      if (maxPayload < NATS_MAX_PAYLOAD_REQUIRED) {
        throw new ChangeLogConfigError(`nats-server at ${nc.getServer()} accepts messages of at most ${maxPayload} bytes (max_payload); the changelog needs ` +
          `${NATS_MAX_PAYLOAD_REQUIRED} (one grain turn is one entry): set \`max_payload: 8MB\` in every nats-server's configuration`);
      }
      const jsm = await jetstreamManager(nc, { timeout: requestTimeoutMs });
      const reads = await jetstreamManager(nc, { timeout: options.readTimeoutMs ?? 2_000, checkAPI: false });
      const log = new JetStreamChangeLog(
        nc, jetstream(nc, { timeout: requestTimeoutMs }), jsm, reads,
        options.stream ?? "CV_LOG", options.subjectPrefix ?? "cv.log",
        options.appendTimeoutMs ?? 2_000, requestTimeoutMs,
      );
      await log.ensureStream(options.replicas ?? 3);
      return log;
    } catch (err) {
      await nc.close();
      throw err;
    }
  }

  async append(partition: number, records: readonly Uint8Array[], expectedLastSeq: number): Promise<AppendOutcome> {
    checkAppend(partition, records, expectedLastSeq);
    return this.publish(partition, "records", records, expectedLastSeq);
  }

  async appendFence(partition: number, mark: Uint8Array, expectedLastSeq: number): Promise<AppendOutcome> {
    checkAppend(partition, [mark], expectedLastSeq);
    return this.publish(partition, "fence", [mark], expectedLastSeq);
  }

  async lastSeq(partition: number): Promise<number> {
    checkPartition(partition);
    const last = await this.request(`partition ${partition}'s last sequence`,
      () => this.reads.streams.getMessage(this.stream, { last_by_subj: this.subjectOf(partition) }));
    return last?.seq ?? 0;
  }

  async read(partition: number, fromSeq: number, maxEntries: number): Promise<LogEntry[]> {
    checkPartition(partition);
    checkSeq("fromSeq", fromSeq, 1);
    checkMaxEntries(maxEntries);
    // One STREAM.MSG.GET per entry, "the next message of this subject at or after seq",
    // answered by the stream leader. Not an ephemeral consumer: creating one goes through
    // the meta leader, which may place it on a server that just died, and right after a
    // stream leader change that kept reads timing out for 30 s under load (a CI run),
    // while a get needs only the stream leader. A request per entry (~1 ms here) suits
    // the short reads of recovery and tests; a standby follows the log with a consumer.
    const subject = this.subjectOf(partition);
    const out: LogEntry[] = [];
    for (let seq = fromSeq; out.length < maxEntries; ) {
      // next_by_subj is in nats-server's STREAM.MSG.GET since 2.9, though not in the client's MsgRequest type.
      const m = await this.request(`partition ${partition}'s entries from ${seq}`,
        () => this.reads.streams.getMessage(this.stream, { seq, next_by_subj: subject } as unknown as { seq: number }));
      if (!m) break;
      out.push(toEntry(m.seq, m.header?.get(ENTRY_HEADER), m.header?.get(PREV_HEADER), m.data));
      seq = m.seq + 1;
    }
    return out;
  }

  async purgeBelow(partition: number, belowSeq: number): Promise<number> {
    checkPartition(partition);
    checkSeq("belowSeq", belowSeq, 1);
    // Never the last entry: its sequence is what fencing compares against, and a subject
    // purged empty would accept an append that expects 0 again.
    const upTo = Math.min(belowSeq, await this.lastSeq(partition));
    if (upTo <= 1) return 0;
    const res = await this.request(`purging partition ${partition}'s log`,
      () => this.jsm.streams.purge(this.stream, { filter: this.subjectOf(partition), seq: upTo }));
    return res.purged;
  }

  /**
   * An ordered consumer (ephemeral, in memory, one replica) filtered to the partition's
   * subject, from the entry after the last one delivered. The client recreates it at the
   * right sequence when it sees a gap or loses its heartbeats. But creating a consumer
   * goes through the meta leader, and right after a stream leader's loss that kept
   * failing for many seconds under load (a CI run saw 30 s); so a consumer that delivers
   * nothing for STALL_MS while the log has moved on is stopped, and before the next one
   * this follower reads what it missed with STREAM.MSG.GET, which needs only the stream
   * leader. The cost: a quiet follower asks the log's last sequence once per FOLLOW_STALL_MS.
   */
  follow(partition: number, afterSeq: number, onEntry: (entry: LogEntry, pending: number) => void | Promise<void>): Follower {
    checkPartition(partition);
    checkSeq("afterSeq", afterSeq, 0);
    const subject = this.subjectOf(partition);
    let stopped = false;
    let current: { stop(): void } | undefined;
    let after = afterSeq;
    const deliver = async (entry: LogEntry, pending: number) => {
      try {
        await onEntry(entry, pending);
      } catch (err) {
        throw new FollowerStopped(err);
      }
      after = entry.seq;
    };
    const run = async () => {
      let readFirst = false;
      while (!stopped) {
        try {
          // After a failure: what the log holds beyond `after`, by reads from the stream leader.
          while (readFirst && !stopped) {
            const page = await this.read(partition, after + 1, FOLLOW_BATCH);
            if (page.length === 0) break;
            for (const entry of page) if (!stopped) await deliver(entry, 0);
          }
          if (stopped) break;
          readFirst = true;
          const consumer = await this.js.consumers.get(this.stream, {
            // One subject as a string: a list needs nats-server 2.10 (multiple filters).
            filter_subjects: subject, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: after + 1,
          });
          // Short pulls and heartbeats, so a lost leader is noticed in seconds, not the default 30 s.
          const messages = await consumer.consume({ max_messages: FOLLOW_BATCH, expires: FOLLOW_PULL_EXPIRES_MS, idle_heartbeat: FOLLOW_HEARTBEAT_MS });
          current = messages;
          if (stopped) messages.stop();
          let deliveredAt = Date.now();
          const watchdog = setInterval(() => {
            if (Date.now() - deliveredAt < FOLLOW_STALL_MS) return;
            // Quiet since the last check: ask the log once; caught up means wait another stall period.
            deliveredAt = Date.now();
            this.lastSeq(partition).then((last) => {
              if (last > after) messages.stop();
            }, () => messages.stop());
          }, FOLLOW_STALL_CHECK_MS);
          try {
            for await (const m of messages) {
              if (m.seq <= after) continue;
              deliveredAt = Date.now();
              await deliver(toEntry(m.seq, m.headers?.get(ENTRY_HEADER), m.headers?.get(PREV_HEADER), m.data), m.info.pending);
              if (stopped) break;
            }
          } finally {
            clearInterval(watchdog);
            messages.stop();
          }
        } catch (err) {
          if (err instanceof FollowerStopped) throw err.cause;
          // The log could not be read now: follow again shortly, after the last entry delivered.
          if (!stopped) await new Promise((resolve) => setTimeout(resolve, FOLLOW_RETRY_MS));
        }
      }
    };
    const done = run();
    done.catch(() => {});
    return {
      stopped: done,
      stop: async () => {
        stopped = true;
        current?.stop();
        await done.catch(() => {});
      },
    };
  }

  /** The stream leader's server name ("" while it has none), for status and for tests. */
  async leader(): Promise<string> {
    const info = await this.jsm.streams.info(this.stream);
    return info.cluster?.leader ?? "";
  }

  /**
   * The partitions' snapshot store on this log's connection, so that a node holds one
   * NATS connection; closing the log closes the store's connection too.
   */
  openSnapshotStore(options: JetStreamSnapshotStoreOptions = {}): Promise<JetStreamSnapshotStore> {
    return JetStreamSnapshotStore.open(this.nc, { requestTimeoutMs: this.requestTimeoutMs, ...options });
  }

  async close(): Promise<void> {
    await this.nc.close();
  }

  private subjectOf(partition: number): string {
    return `${this.subjectPrefix}.${partition}`;
  }

  /** A request to the stream's leader: one the log could not answer now rejects UNAVAILABLE / LOG_UNAVAILABLE. */
  private async request<T>(what: string, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (err) {
      const unavailable = err instanceof JetStreamApiError ? err.status >= 500 : unanswered(err) !== undefined;
      if (!unavailable) throw err;
      throw new ConveyorError("UNAVAILABLE", "LOG_UNAVAILABLE", `the changelog did not answer (${what}: ${err instanceof Error ? err.message : String(err)}); retry`);
    }
  }

  private async publish(partition: number, kind: EntryKind, records: readonly Uint8Array[], expectedLastSeq: number): Promise<AppendOutcome> {
    const h = headers();
    if (kind === "fence") h.set(ENTRY_HEADER, "fence");
    h.set(PREV_HEADER, String(expectedLastSeq));
    try {
      const ack = await this.js.publish(this.subjectOf(partition), frameRecords(records), {
        expect: { lastSubjectSequence: expectedLastSeq },
        timeout: this.appendTimeoutMs,
        headers: h,
      });
      return { kind: "ok", seq: ack.seq };
    } catch (err) {
      return outcomeOfFailure(err);
    }
  }

  private async ensureStream(replicas: number): Promise<void> {
    const subject = `${this.subjectPrefix}.>`;
    const config: Partial<StreamConfig> & { name: string } = {
      name: this.stream,
      subjects: [subject],
      storage: StorageType.File,
      num_replicas: replicas,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      // Reads must come from the leader (see the header comment).
      allow_direct: false,
      // Entries leave only by purge below a snapshot, never one by one.
      deny_delete: true,
    };
    try {
      await this.jsm.streams.add(config);
    } catch (err) {
      // Created before, maybe by another node with the same config (then add succeeds) or
      // with other settings: accept it only if it holds our subjects.
      const info = await this.jsm.streams.info(this.stream).catch(() => undefined);
      if (!info?.config.subjects?.includes(subject)) throw err;
    }
  }
}

/** An entry from a stored message: its kind and predecessor from the headers, its records from the body. */
function toEntry(seq: number, kind: string | undefined, prev: string | undefined, data: Uint8Array): LogEntry {
  const entry: LogEntry = { seq, kind: kind === "fence" ? "fence" : "records", records: unframeRecords(data) };
  if (prev !== undefined && prev !== "" && Number.isSafeInteger(Number(prev))) entry.prevSeq = Number(prev);
  return entry;
}

/** Messages a follower's consumer asks for at a time. */
const FOLLOW_BATCH = 256;
/** How long one pull of a follower waits for messages, and the heartbeat the server sends meanwhile. */
const FOLLOW_PULL_EXPIRES_MS = 5_000;
const FOLLOW_HEARTBEAT_MS = 1_000;
/** A follower's consumer that delivered nothing this long while the log moved on is replaced (a quiet one checks that once per period). */
const FOLLOW_STALL_MS = 5_000;
const FOLLOW_STALL_CHECK_MS = 1_000;
/** How soon a follower that lost the log tries again. */
const FOLLOW_RETRY_MS = 500;

/** An `onEntry` of a follower threw: the follower ends with its error. */
class FollowerStopped extends Error {
  constructor(override readonly cause: unknown) {
    super("follower stopped by its callback");
  }
}

/** Maps a failed publish to its outcome: only a wrong last sequence is a definite refusal. */
function outcomeOfFailure(err: unknown): AppendOutcome {
  const detail = err instanceof Error ? err.message : String(err);
  if (err instanceof JetStreamApiError) {
    if (err.code === WRONG_LAST_SEQUENCE) {
      const last = /wrong last sequence: (\d+)/.exec(detail);
      return last ? { kind: "fenced", lastSeq: Number(last[1]), detail } : { kind: "fenced", detail };
    }
    // 503s (no leader, JetStream temporarily unavailable) and anything else the leader
    // refused for a reason we cannot act on: the writer stops and re-reads the tail.
    return { kind: "unknown", reason: "no_quorum", detail };
  }
  const reason = unanswered(err);
  if (reason) return { kind: "unknown", reason, detail };
  throw err;
}

/** Why a request got no answer (a timeout, no responders, the connection down), or undefined for any other failure. */
function unanswered(err: unknown): "timeout" | "no_quorum" | "unavailable" | undefined {
  if (err instanceof errors.TimeoutError) return "timeout";
  // No responders: no server has the stream's subject now (its leader is gone).
  if (err instanceof Error && err.name === "JetStreamNotEnabled") return "no_quorum";
  if (err instanceof errors.ClosedConnectionError || err instanceof errors.ConnectionError || err instanceof errors.DrainingConnectionError || err instanceof errors.RequestError) {
    return "unavailable";
  }
  return undefined;
}
