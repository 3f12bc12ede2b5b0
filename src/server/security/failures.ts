/**
 * Refused calls: each is logged (transport, RPC or path, reason, the identity when one
 * was established, the peer) and counted in `conveyor_auth_failures_total`, never with
 * the token. A burst of them is someone guessing or a client deployed without its token.
 */
import type { Logger } from "pino";
import { Counter, type Registry } from "prom-client";
import type { Transport } from "./identity.js";

export interface Refusal {
  transport: Transport;
  /** The RPC (`AdminService/PauseQueue`) or HTTP path refused. */
  what: string;
  /** The ErrorReason (CREDENTIALS_REQUIRED, CREDENTIALS_UNKNOWN, ROLE_REQUIRED, FORWARDED_IDENTITY_REFUSED, QUEUE_NOT_IN_SCOPE) or HOST_NOT_ALLOWED. */
  reason: string;
  identity?: string;
  /** For QUEUE_NOT_IN_SCOPE: the queue outside the identity's scope (cut short: it came from the request). */
  queue?: string;
  peer?: string;
}

export class AuthFailures {
  private readonly counter: Counter<"transport" | "reason">;

  constructor(registry: Registry, private readonly logger: Logger) {
    this.counter = new Counter({
      name: "conveyor_auth_failures_total",
      help: "Calls refused for missing or unknown credentials, a missing role, a queue outside the caller's scope, or a Host not allowed, by transport and reason.",
      labelNames: ["transport", "reason"] as const, registers: [registry],
    });
  }

  record(refusal: Refusal): void {
    this.counter.inc({ transport: refusal.transport, reason: refusal.reason });
    this.logger.warn({ refused: refusal }, "call refused by authentication or authorisation");
  }
}
