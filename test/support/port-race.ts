/**
 * Servers we cannot ask for port 0 (etcd, nats-server: their advertised URLs are given up
 * front) get ports from `freePort()`, which binds and releases one. Between the release
 * and the server's own bind, a parallel test may take the port: the server exits with
 * "address already in use". That is a race of the fixture, not a fault under test, so
 * the fixture starts again on fresh ports (bounded); any other start-up failure is
 * reported as is.
 */
const PORT_TAKEN = /address already in use/i;
const ATTEMPTS = 3;

/** Thrown by a fixture's start-up when one of its servers exited because its port was taken. */
export class PortTakenError extends Error {}

/** True when a server's output says it could not bind its port. */
export function portTaken(output: string): boolean {
  return PORT_TAKEN.test(output);
}

/** Runs `start` (which picks fresh ports each time) until it does not fail with PortTakenError, at most three times. */
export async function startOnFreshPorts<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (!(err instanceof PortTakenError) || attempt >= ATTEMPTS) throw err;
    }
  }
}
