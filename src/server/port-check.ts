/**
 * A listen address that is taken becomes one line naming the port, the host and the
 * setting to change, instead of grpc-js's "No address added out of total 1 resolved"
 * (printed on its own logger too) or a bare EADDRINUSE.
 */
import { createServer } from "node:net";

/** What conveyord says when `address` (the value of setting `key`) cannot be listened on. */
export function listenFailure(address: string, key: string, error: unknown): Error {
  const [host, port] = splitAddress(address);
  // grpc-js reports the errno only in its message ("... errors: [listen EADDRINUSE: ...]").
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? /\b(EADDRINUSE|EACCES|EADDRNOTAVAIL)\b/.exec(String(error))?.[1];
  if (code === "EADDRINUSE") {
    return new Error(`port ${port} on ${host} is in use (${key}); stop the other process or choose another port with --${key} HOST:PORT`, { cause: error });
  }
  if (code === "EACCES") return new Error(`no permission to listen on port ${port} on ${host} (${key})`, { cause: error });
  if (code === "EADDRNOTAVAIL") return new Error(`${host} is not an address of this machine (${key}=${address})`, { cause: error });
  return new Error(`cannot listen on ${address} (${key}): ${error instanceof Error ? error.message : String(error)}`, { cause: error });
}

/**
 * Listens on `address` for a moment and closes again: rejects with listenFailure when the
 * port is taken, before grpc-js tries it. Port 0 (any free port) always passes.
 */
export function checkPortFree(address: string, key: string): Promise<void> {
  const [host, port] = splitAddress(address);
  if (Number(port) === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (error) => reject(listenFailure(address, key, error)));
    probe.listen({ host, port: Number(port), exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** "127.0.0.1:7233" → ["127.0.0.1", "7233"]; "[::1]:7233" → ["::1", "7233"]. */
function splitAddress(address: string): [string, string] {
  const colon = address.lastIndexOf(":");
  const host = colon < 0 ? address : address.slice(0, colon);
  return [host.replace(/^\[(.*)\]$/, "$1"), colon < 0 ? "" : address.slice(colon + 1)];
}
