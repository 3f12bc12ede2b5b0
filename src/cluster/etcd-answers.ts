/**
 * What the etcd client's failures become before they reach a caller: a coordination call
 * that etcd failed (unreachable, deadline passed, no leader, a circuit breaker's refusal)
 * is `UNAVAILABLE / ETCD_UNAVAILABLE`, a retryable answer that says why, never INTERNAL.
 * Found by the etcd restart test: an enqueue that needed a claim or a read of the
 * partition records while etcd was away answered `INTERNAL` with the client's
 * BrokenCircuitError.
 *
 * Also the settings every etcd client of the node shares, for the same fault: etcd3's
 * per-endpoint circuit breaker refused every call for 5 s at a time after three failures,
 * so a node kept failing to register again for ~15 s after a 3 s restart of etcd; and
 * grpc-js backs a channel's reconnects off up to two minutes by default, so the first
 * call after etcd's return could wait seconds for a reconnect. Without them a call to
 * etcd fails or succeeds on its own merits, and the callers' own retries (a few hundred
 * ms apart, membership.ts, cluster-member.ts) decide how often to ask.
 */
import { isBrokenCircuitError, isTaskCancelledError, noop, type IBackoff } from "cockatiel";
import { EtcdError, type IOptions } from "etcd3";
import { etcdUnavailable, ConveyorError } from "../base/errors.js";
import type { Coordination } from "./coordination.js";

/** How soon a channel to etcd connects again after it failed, at most; and a watch stream. */
const RECONNECT_MS_MAX = 250;

/** A watch stream that broke connects again after RECONNECT_MS_MAX, every time (etcd3's default doubles up to 30 s). */
const watchBackoff: IBackoff<unknown> = { duration: RECONNECT_MS_MAX, next: () => watchBackoff };

/** Client options for every etcd client of the node: no circuit breaker, reconnects at most RECONNECT_MS_MAX apart. */
export function etcdClientOptions(hosts: string[], extra: Partial<IOptions> = {}, retries = true): IOptions {
  return {
    ...extra,
    hosts,
    grpcOptions: { "grpc.initial_reconnect_backoff_ms": 100, "grpc.max_reconnect_backoff_ms": RECONNECT_MS_MAX },
    faultHandling: {
      host: () => noop,
      // etcd3's own retry (three attempts, another endpoint each when there are several) stays where wanted.
      ...(retries ? {} : { global: noop }),
      watchBackoff,
    },
  };
}

/** Is this the etcd client's failure (as opposed to a refusal of ours or a bug)? */
function fromEtcd(error: unknown): boolean {
  return error instanceof EtcdError || isBrokenCircuitError(error) || isTaskCancelledError(error);
}

const answered = <A extends unknown[], R>(target: Coordination, f: (...args: A) => Promise<R>) =>
  (...args: A): Promise<R> => f.apply(target, args).catch((error: unknown) => {
    throw error instanceof ConveyorError || !fromEtcd(error) ? error : etcdUnavailable(error);
  });

/** `target` with every etcd failure of its calls answered UNAVAILABLE / ETCD_UNAVAILABLE. */
export function answeringUnavailable(target: Coordination): Coordination {
  return {
    clusterMeta: answered(target, target.clusterMeta),
    grantLease: answered(target, target.grantLease),
    keepAlive: answered(target, target.keepAlive),
    leaseTimeLeftMs: answered(target, target.leaseTimeLeftMs),
    revokeLease: answered(target, target.revokeLease),
    putMember: answered(target, target.putMember),
    deleteMember: answered(target, target.deleteMember),
    members: answered(target, target.members),
    watchMembers: answered(target, target.watchMembers),
    claimPartition: answered(target, target.claimPartition),
    releasePartition: answered(target, target.releasePartition),
    partitions: answered(target, target.partitions),
    watchPartitions: answered(target, target.watchPartitions),
    setDrain: answered(target, target.setDrain),
    setPin: answered(target, target.setPin),
    overrides: answered(target, target.overrides),
    watchOverrides: answered(target, target.watchOverrides),
    typeRules: answered(target, target.typeRules),
    writeTypeRules: answered(target, target.writeTypeRules),
    watchTypeRules: answered(target, target.watchTypeRules),
    health: answered(target, target.health),
    close: () => target.close(),
  };
}
