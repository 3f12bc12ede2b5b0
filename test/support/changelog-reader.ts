/**
 * Reads a cluster's changelog from a test, as a node would (JetStreamChangeLog over the
 * fixture's nats-server), and decodes what the fault tests check: each fence's mark
 * (`{node, epoch, atMs}`, server/changelog-link.ts) and, for records, the task ids each
 * turn inserted and the leases each turn handed out. Records entries do not name the node
 * that appended them; what identifies a writer is the fence before them and what the
 * records hold.
 */
import { decodeTurn } from "../../src/changelog/change-record.js";
import { JetStreamChangeLog } from "../../src/changelog/jetstream-change-log.js";
import type { NatsCluster } from "./nats.js";

export interface FenceMark {
  node: string;
  epoch: number;
  atMs: number;
}

export interface ReadEntry {
  seq: number;
  kind: "records" | "fence";
  /** A fence's mark. */
  fence?: FenceMark;
  /** Task ids inserted by the entry's turns (enqueues). */
  inserted: string[];
  /** Lease ids handed out by the entry's turns (deliveries). */
  leased: string[];
}

/** A reader of the cluster's log (the stream exists: a node created it). */
export function openLogReader(nats: NatsCluster): Promise<JetStreamChangeLog> {
  return JetStreamChangeLog.open({ servers: nats.urls, replicas: 3, connectionName: "test log reader" });
}

/** Every entry of partition `p`, in order, decoded. */
export async function readPartition(log: JetStreamChangeLog, p: number): Promise<ReadEntry[]> {
  const out: ReadEntry[] = [];
  for (let from = 1; ;) {
    const page = await log.read(p, from, 256);
    if (page.length === 0) return out;
    for (const e of page) {
      if (e.kind === "fence") {
        out.push({ seq: e.seq, kind: "fence", fence: JSON.parse(new TextDecoder().decode(e.records[0])) as FenceMark, inserted: [], leased: [] });
        continue;
      }
      const inserted: string[] = [];
      const leased: string[] = [];
      for (const record of e.records) {
        for (const effect of decodeTurn(record).effects) {
          if (effect.kind === "insert") inserted.push(effect.task.id);
          if (effect.kind === "activate") leased.push(effect.entry.leaseId);
        }
      }
      out.push({ seq: e.seq, kind: "records", inserted, leased });
    }
    from = page.at(-1)!.seq + 1;
  }
}
