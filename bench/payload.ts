/** The benchmark's task payload: a JSON object of ~110 bytes. */
import { json, newTask, type NewTaskSpec } from "../src/index.js";
import { TASK_TYPE } from "./protocol.js";

export const PAYLOAD_BYTES = 110;
const EVENTS = ["signup", "login", "upgrade", "logout"] as const;
const PLANS = ["free", "pro", "team"] as const;
const PAD = "abcdefghijklmnopqrstuvwxyz0123456789".repeat(4);

/**
 * {"userId":"u-000123","event":"signup","plan":"pro","ts":1700000000000,"ref":"abc..."}
 * with `ref` padded so the JSON is ~110 bytes. `ts` is the producer's clock at the
 * enqueue call (wallNow(), fractional ms) when given, else a fixed instant.
 */
export function payloadOf(i: number, ts = 1_700_000_000_000): { userId: string; event: string; plan: string; ts: number; ref: string } {
  const userId = `u-${String(i % 1_000_000).padStart(6, "0")}`;
  const event = EVENTS[i % EVENTS.length]!;
  const plan = PLANS[i % PLANS.length]!;
  // Length of the JSON with an empty ref, without serializing twice.
  const bare = `{"userId":"${userId}","event":"${event}","plan":"${plan}","ts":${ts},"ref":""}`.length;
  return { userId, event, plan, ts, ref: PAD.slice(0, Math.max(0, PAYLOAD_BYTES - bare)) };
}

/** The i-th benchmark task, its payload encoded with the SDK's json(). */
export function benchTask(i: number, ts?: number): NewTaskSpec {
  return newTask(TASK_TYPE, json(payloadOf(i, ts)));
}
