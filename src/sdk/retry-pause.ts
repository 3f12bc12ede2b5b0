/**
 * How long the SDK pauses before trying a call again: doubling from the first pause up to
 * the reconnect cap, jittered, so that a node coming back is not met by every client at
 * once, and a client resumes within about RECONNECT_BACKOFF_MAX_MS of the node's return.
 */
import { RECONNECT_BACKOFF_INITIAL_MS, RECONNECT_BACKOFF_MAX_MS } from "../base/limits.js";

/** A pause of between half and all of `ms`. */
export const jitter = (ms: number): number => ms / 2 + Math.random() * (ms / 2);

/** The pause before retry number `attempt` (0 first). */
export const retryPauseMs = (attempt: number): number =>
  jitter(Math.min(RECONNECT_BACKOFF_MAX_MS, RECONNECT_BACKOFF_INITIAL_MS * 2 ** Math.min(attempt, 10)));
