/**
 * The cluster secret (`cluster_secret_file`): how the nodes of a cluster know each other.
 * Every node-to-node call (a handoff's AcceptPartition, a forwarded call, a merged read,
 * a shared-rule report) carries `authorization: Cluster <secret>`, and a node that accepts the
 * secret gives the caller the `node` role (identity.ts).
 *
 * Why a shared secret rather than only peer certificates: it works with or without TLS,
 * it is one file per cluster that a Kubernetes Secret, a compose secret or a systemd
 * credential ships as-is, and it needs no CA. Its weakness is that of any bearer
 * credential: on a network that can be sniffed it needs TLS, like the clients' tokens.
 * A node known by its client certificate instead (an auth-file `certificates:` entry with
 * `roles: [node]`) gets the same role.
 *
 * The file holds one secret per line (blank lines and `#` comments ignored). The node
 * presents the first and accepts any of them, so a secret is rotated without a failed
 * handoff: add the new one second on every node, move it first on every node, then remove
 * the old one. Each secret has at least 32 characters (`conveyord cluster-secret` makes
 * one of 256 random bits). Comparisons are of SHA-256 digests with `timingSafeEqual`, so
 * the time a check takes says nothing about how much of a guess was right.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { TOKEN_RANDOM_BYTES } from "../../base/limits.js";

/** The authorization scheme of node-to-node calls. */
export const CLUSTER_SCHEME = "Cluster";
/** Shorter secrets are refused: a secret someone typed is a password, not a key. */
export const CLUSTER_SECRET_MIN_CHARS = 32;
const SECRET_PREFIX = "cvc_";

const digest = (secret: string): Buffer => createHash("sha256").update(secret, "utf8").digest();

export class ClusterSecret {
  private constructor(
    /** The secret this node presents. */
    readonly presented: string,
    private readonly accepted: readonly Buffer[],
    /** The file's text, to tell a change on disk from a touch. */
    readonly text: string,
  ) {}

  /** Parses the file's text; throws naming `where` and the line at fault (never echoing a secret). */
  static parse(text: string, where: string): ClusterSecret {
    const secrets: string[] = [];
    text.split(/\r?\n/).forEach((raw, i) => {
      const line = raw.trim();
      if (line === "" || line.startsWith("#")) return;
      if (/\s/.test(line)) throw new Error(`${where}: line ${i + 1} holds more than one word; put one secret per line`);
      if (line.length < CLUSTER_SECRET_MIN_CHARS) {
        throw new Error(`${where}: line ${i + 1} is a secret of ${line.length} characters; it needs at least ${CLUSTER_SECRET_MIN_CHARS} (make one with \`conveyord cluster-secret\`)`);
      }
      secrets.push(line);
    });
    if (secrets.length === 0) throw new Error(`${where}: holds no secret (make one with \`conveyord cluster-secret > FILE\`)`);
    return new ClusterSecret(secrets[0]!, secrets.map(digest), text);
  }

  static read(file: string): ClusterSecret {
    const where = `cluster_secret_file ${file}`;
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (e) {
      throw new Error(`${where}: ${(e as Error).message}`);
    }
    return ClusterSecret.parse(text, where);
  }

  /** Whether `candidate` is one of the secrets, compared in constant time (every secret is checked). */
  accepts(candidate: string): boolean {
    const presented = digest(candidate);
    let ok = false;
    for (const secret of this.accepted) ok = timingSafeEqual(presented, secret) || ok;
    return ok;
  }
}

/** A new random secret for the file (`conveyord cluster-secret`). */
export const newClusterSecret = (): string => SECRET_PREFIX + randomBytes(TOKEN_RANDOM_BYTES).toString("base64url");

/**
 * The cluster secret in force, shared by the authenticator (which accepts it) and the
 * peer channels (which present it); a reload replaces it for the next call.
 */
export class ClusterSecretHolder {
  constructor(private current: ClusterSecret) {}

  get secret(): ClusterSecret {
    return this.current;
  }

  replace(next: ClusterSecret): void {
    this.current = next;
  }
}
