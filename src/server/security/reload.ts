/**
 * Reloads the node's security files while it runs: the TLS certificate, key and client CA,
 * the auth file's tokens and certificates, and the cluster secret. On SIGHUP both are read again and logged;
 * on a change on disk (file-watch.ts) only what changed is. A file that does not load (half
 * written, a key that does not match, a typo in a role) keeps what is in force, with the
 * error logged: a node must not lose its certificate or its tokens to an edit in progress.
 */
import type { Logger } from "pino";
import { readAuthFile } from "./auth-file.js";
import { watchFiles, type FileWatch } from "./file-watch.js";
import { ClusterSecret, type ClusterSecretHolder } from "./cluster-secret.js";
import type { Authenticator } from "./identity.js";
import type { TlsMaterial } from "./tls.js";

export type ReloadTrigger = "SIGHUP" | "file change";

export interface ReloadParts {
  authn: Authenticator;
  tls: TlsMaterial | undefined;
  /** The auth file and the text in force; undefined when auth is off. */
  authFile: { path: string; text: string } | undefined;
  /** The cluster secret file and the secret in force; undefined when none is configured. */
  clusterSecret: { path: string; holder: ClusterSecretHolder } | undefined;
  logger: Logger;
}

export class SecurityReloader {
  private authText: string;

  constructor(private readonly parts: ReloadParts) {
    this.authText = parts.authFile?.text ?? "";
  }

  reload(trigger: ReloadTrigger): void {
    const { tls, authFile, clusterSecret, logger } = this.parts;
    if (!tls && !authFile && !clusterSecret) {
      logger.info({ trigger }, "neither TLS nor an auth file nor a cluster secret is configured; nothing to reload");
      return;
    }
    if (tls) this.reloadTls(tls, trigger);
    if (authFile) this.reloadAuth(authFile.path, trigger);
    if (clusterSecret) this.reloadClusterSecret(clusterSecret.path, clusterSecret.holder, trigger);
  }

  /** Watches the files in force; undefined when there are none. */
  watch(): FileWatch | undefined {
    const { tls, authFile, clusterSecret, logger } = this.parts;
    const files = [...(tls?.paths ?? []), ...(authFile ? [authFile.path] : []), ...(clusterSecret ? [clusterSecret.path] : [])];
    if (files.length === 0) return undefined;
    return watchFiles(files, () => this.reload("file change"), (err, folder) =>
      logger.warn({ err, folder }, "cannot watch this folder for changes to TLS or auth files; SIGHUP still reloads them"));
  }

  private reloadTls(tls: TlsMaterial, trigger: ReloadTrigger): void {
    const { logger } = this.parts;
    try {
      // SIGHUP always reloads (the operator asked); a change event only when the bytes differ.
      if (trigger === "SIGHUP") tls.reload();
      else if (!tls.reloadIfChanged()) return;
      logger.info({ trigger }, "TLS certificate reloaded");
    } catch (err) {
      // On a change this is often a file caught half written: the next write retries.
      logger[trigger === "SIGHUP" ? "error" : "warn"]({ err, trigger }, "TLS reload failed; still serving the previous certificate");
    }
  }

  private reloadAuth(path: string, trigger: ReloadTrigger): void {
    const { authn, logger } = this.parts;
    try {
      const { text, policy } = readAuthFile(path);
      if (trigger === "file change" && text === this.authText) return;
      authn.replace(policy);
      this.authText = text;
      logger.info({ trigger, tokens: policy.tokens.size, certificates: policy.certificates.size }, "auth file reloaded");
    } catch (err) {
      logger.error({ err, trigger }, "auth file reload failed; still using the previous tokens and certificates");
    }
  }

  private reloadClusterSecret(path: string, holder: ClusterSecretHolder, trigger: ReloadTrigger): void {
    const { logger } = this.parts;
    try {
      const next = ClusterSecret.read(path);
      if (trigger === "file change" && next.text === holder.secret.text) return;
      holder.replace(next);
      logger.info({ trigger }, "cluster secret reloaded");
    } catch (err) {
      logger.error({ err, trigger }, "cluster secret reload failed; still using the previous secret");
    }
  }
}
