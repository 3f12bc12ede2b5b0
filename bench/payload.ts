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

/** A small seeded PRNG (mulberry32): the same shuffle on every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * `count` key indexes over `keys` keys, as even as possible (count / keys each), in a
 * seeded random order: element i is the key of the i-th task.
 */
export function shuffledKeys(count: number, keys: number, seed = 42): number[] {
  const out = Array.from({ length: count }, (_, i) => i % keys);
  const random = seededRandom(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
