/**
 * SIGINT and SIGTERM for the Workers that handle them (the default): the first signal
 * stops every such Worker of the process gracefully, then exits; a second one exits at
 * once. One pair of process listeners serves all Workers, so two Workers in a process do
 * not race to exit while the other is still draining. The listeners are removed when the
 * last Worker leaves, giving the process back its default signal behaviour.
 */

export interface SignalStoppable {
  /** Stops gracefully because of `signal` (logs why, drains, settles). */
  stopForSignal(signal: NodeJS.Signals): Promise<void>;
}

const SIGNALS: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM"];
const members = new Set<SignalStoppable>();
let stopping = false;

function onSignal(signal: NodeJS.Signals): void {
  if (stopping) {
    process.stderr.write(`conveyor worker: second ${signal}: exiting now without waiting for running tasks\n`);
    process.exit(1);
  }
  stopping = true;
  void Promise.allSettled([...members].map((m) => m.stopForSignal(signal))).then(() => process.exit(0));
}

/** Makes `member` stop on SIGINT/SIGTERM; returns the function that undoes it. */
export function stopOnSignals(member: SignalStoppable): () => void {
  if (members.size === 0) for (const s of SIGNALS) process.on(s, onSignal);
  members.add(member);
  return () => {
    if (!members.delete(member) || members.size > 0 || stopping) return;
    for (const s of SIGNALS) process.off(s, onSignal);
  };
}
