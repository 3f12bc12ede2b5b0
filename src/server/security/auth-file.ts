/**
 * The auth file (`auth_file` setting): who may call the node. It holds token hashes,
 * never tokens, so it may be read by whoever deploys the node:
 *
 *   tokens:
 *     - name: deploy-bot              # the identity logs and audit lines show
 *       sha256: 9f86d08…              # `conveyord token new` prints a token and this
 *       roles: [producer]             # admin | producer | worker | reader
 *       queues: [billing-*, emails]   # optional: only these queues (`*` = any run); none = all
 *   certificates:                     # with tls_client_ca: a client certificate's subject CN
 *     - name: worker-fleet
 *       common_name: worker-1.internal
 *       roles: [worker]               # queues: as for tokens; [node] for another node
 *   metrics_public: false             # true: GET /metrics needs no token
 *
 * Every mistake is refused at start with the file and the entry named: a typo in a role
 * must never turn into a token that silently can do nothing (or everything).
 */
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { queueScopeOf, type QueueScope } from "./queue-scope.js";
import { isRole, ROLES, type Role } from "./roles.js";

/** Someone the node knows: a token's or a client certificate's holder. */
export interface Principal {
  name: string;
  roles: ReadonlySet<Role>;
  /** The queues it may touch; undefined: every queue. */
  scope: QueueScope | undefined;
}

export interface AuthPolicy {
  /** SHA-256 (hex) of each token → its holder. */
  tokens: ReadonlyMap<string, Principal>;
  /** A verified client certificate's subject CN → its holder. */
  certificates: ReadonlyMap<string, Principal>;
  metricsPublic: boolean;
}

const FILE_KEYS = ["tokens", "certificates", "metrics_public"];
const TOKEN_KEYS = ["name", "sha256", "roles", "queues"];
const CERTIFICATE_KEYS = ["name", "common_name", "roles", "queues"];

export function loadAuthFile(file: string): AuthPolicy {
  return readAuthFile(file).policy;
}

/** The file's text too: a reload on a change event compares it with the text in force. */
export function readAuthFile(file: string): { text: string; policy: AuthPolicy } {
  let text: string;
  let doc: unknown;
  try {
    text = readFileSync(file, "utf8");
    doc = parseYaml(text) ?? {};
  } catch (e) {
    throw new Error(`auth_file ${file}: ${(e as Error).message}`);
  }
  return { text, policy: parseAuthPolicy(doc, `auth_file ${file}`) };
}

export function parseAuthPolicy(doc: unknown, where: string): AuthPolicy {
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new Error(`${where}: expected a mapping with "tokens"`);
  const record = doc as Record<string, unknown>;
  for (const k of Object.keys(record)) {
    if (!FILE_KEYS.includes(k)) throw new Error(`${where}: unknown key ${JSON.stringify(k)}; known: ${FILE_KEYS.join(", ")}`);
  }
  const metricsPublic = record.metrics_public ?? false;
  if (typeof metricsPublic !== "boolean") throw new Error(`${where}: metrics_public must be true or false`);
  const list = record.tokens ?? [];
  if (!Array.isArray(list)) throw new Error(`${where}: tokens must be a list`);
  const tokens = new Map<string, Principal>();
  const names = new Set<string>();
  list.forEach((entry: unknown, i) => {
    const at = `${where}: tokens[${i}]`;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) throw new Error(`${at}: expected a mapping with name, sha256 and roles`);
    const e = entry as Record<string, unknown>;
    for (const k of Object.keys(e)) if (!TOKEN_KEYS.includes(k)) throw new Error(`${at}: unknown key ${JSON.stringify(k)}; known: ${TOKEN_KEYS.join(", ")}`);
    if (typeof e.name !== "string" || e.name.trim() === "") throw new Error(`${at}: name must be a non-empty string`);
    if (names.has(e.name)) throw new Error(`${at}: the name ${JSON.stringify(e.name)} is used twice`);
    if (typeof e.sha256 !== "string" || !/^[0-9a-f]{64}$/i.test(e.sha256)) {
      throw new Error(`${at} (${e.name}): sha256 must be 64 hex digits (the token's hash, from \`conveyord token new\` or \`conveyord token hash\`), never the token`);
    }
    const hash = e.sha256.toLowerCase();
    if (tokens.has(hash)) throw new Error(`${at} (${e.name}): the same token hash as ${tokens.get(hash)!.name}`);
    names.add(e.name);
    const principal = principalOf(e, e.name, `${at} (${e.name})`);
    // A node token would be a second cluster secret, unrotated and unnoticed: nodes present cluster_secret_file.
    if (principal.roles.has("node")) throw new Error(`${at} (${e.name}): the node role is not for tokens; nodes authenticate with cluster_secret_file (or a certificate)`);
    tokens.set(hash, principal);
  });
  const certList = record.certificates ?? [];
  if (!Array.isArray(certList)) throw new Error(`${where}: certificates must be a list`);
  const certificates = new Map<string, Principal>();
  certList.forEach((entry: unknown, i) => {
    const at = `${where}: certificates[${i}]`;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) throw new Error(`${at}: expected a mapping with name, common_name and roles`);
    const e = entry as Record<string, unknown>;
    for (const k of Object.keys(e)) if (!CERTIFICATE_KEYS.includes(k)) throw new Error(`${at}: unknown key ${JSON.stringify(k)}; known: ${CERTIFICATE_KEYS.join(", ")}`);
    if (typeof e.name !== "string" || e.name.trim() === "") throw new Error(`${at}: name must be a non-empty string`);
    if (names.has(e.name)) throw new Error(`${at}: the name ${JSON.stringify(e.name)} is used twice`);
    if (typeof e.common_name !== "string" || e.common_name === "") throw new Error(`${at} (${e.name}): common_name must be the certificate subject's CN`);
    if (certificates.has(e.common_name)) throw new Error(`${at} (${e.name}): common_name ${JSON.stringify(e.common_name)} is listed twice`);
    names.add(e.name);
    certificates.set(e.common_name, principalOf(e, e.name, `${at} (${e.name})`));
  });
  return { tokens, certificates, metricsPublic };
}

function principalOf(entry: Record<string, unknown>, name: string, at: string): Principal {
  const roles = rolesOf(entry.roles, at);
  const scope = queueScopeOf(entry.queues, at);
  if (roles.has("node") && (roles.size > 1 || scope)) throw new Error(`${at}: the node role stands alone (no other roles, no queues): a node forwards for callers of every queue`);
  return { name, roles, scope };
}

function rolesOf(roles: unknown, at: string): ReadonlySet<Role> {
  if (!Array.isArray(roles) || roles.length === 0) throw new Error(`${at}: roles must be a non-empty list of ${ROLES.join(", ")}`);
  for (const r of roles) if (!isRole(r)) throw new Error(`${at}: unknown role ${JSON.stringify(r)}; known: ${ROLES.join(", ")}`);
  return new Set(roles as Role[]);
}
