/**
 * The auth-file entry `conveyord token new --name …` prints, checked by the same parser
 * the node runs at start: an entry it prints always loads, and a typo in a role or a
 * pattern fails here, at the operator's terminal, not at the node's next start.
 */
import { parseAuthPolicy } from "./auth-file.js";

export interface EntryOptions {
  name: string;
  sha256: string;
  /** Comma-separated roles. */
  roles: string;
  /** Comma-separated queue patterns; undefined: every queue. */
  queues?: string | undefined;
}

const list = (csv: string) => csv.split(",").map((s) => s.trim()).filter((s) => s !== "");

/** The YAML lines of one `tokens:` item; throws the parser's own message for a bad role or pattern. */
export function authFileEntry(options: EntryOptions): string {
  const entry = {
    name: options.name, sha256: options.sha256, roles: list(options.roles),
    ...(options.queues !== undefined ? { queues: list(options.queues) } : {}),
  };
  parseAuthPolicy({ tokens: [entry] }, "--name/--roles/--queues");
  // JSON strings are YAML scalars: a pattern starting with `*` is not read as an alias.
  const lines = [`  - name: ${JSON.stringify(entry.name)}`, `    sha256: ${entry.sha256}`, `    roles: [${entry.roles.join(", ")}]`];
  if (entry.queues) lines.push(`    queues: [${entry.queues.map((q) => JSON.stringify(q)).join(", ")}]`);
  return lines.join("\n") + "\n";
}
