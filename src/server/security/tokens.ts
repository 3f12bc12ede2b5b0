/**
 * Bearer tokens. A token is 32 random bytes (base64url, prefixed `cvy_` so a leaked one
 * is recognisable in a scan); the node stores only its SHA-256. A slow hash (scrypt) would
 * protect guessable passwords, but these tokens carry 256 bits of entropy, so nobody can
 * search for one from its hash, and a fast hash keeps every call's check at microseconds.
 */
import { createHash, randomBytes } from "node:crypto";
import { TOKEN_RANDOM_BYTES } from "../../base/limits.js";

export const TOKEN_PREFIX = "cvy_";

export const hashToken = (token: string): string => createHash("sha256").update(token, "utf8").digest("hex");

/** A new random token and the hash to put in the auth file. */
export function newToken(): { token: string; sha256: string } {
  const token = TOKEN_PREFIX + randomBytes(TOKEN_RANDOM_BYTES).toString("base64url");
  return { token, sha256: hashToken(token) };
}
