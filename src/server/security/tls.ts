/**
 * TLS for both ports from certificate and key files (`tls_cert`, `tls_key`), with client
 * certificates required and verified against `tls_client_ca` when it is set (mTLS).
 * `reload()` (SIGHUP) reads the files again and hands the new context to the running
 * servers: connections made after it use the new certificate, open ones keep theirs. A
 * reload that fails (a missing file, a key that does not match) keeps the old one.
 * `reloadIfChanged()` is the file watcher's: it reloads only when the bytes on disk differ
 * from the ones served, so an event for another file in the folder costs a read.
 */
import * as grpc from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import { createSecureContext, type SecureContextOptions } from "node:tls";
import type { NodeConfig } from "../config.js";

export type TlsSettings = Pick<NodeConfig, "tlsCert" | "tlsKey" | "tlsClientCa">;

/** Checks the combination of settings; undefined when TLS is off. */
export function tlsFilesOf(config: TlsSettings): { cert: string; key: string; clientCa: string } | undefined {
  if (!config.tlsCert && !config.tlsKey) {
    if (config.tlsClientCa) throw new Error("tls_client_ca is set but tls_cert and tls_key are not: client certificates need TLS");
    return undefined;
  }
  if (!config.tlsCert || !config.tlsKey) throw new Error(`set both tls_cert and tls_key (only ${config.tlsCert ? "tls_cert" : "tls_key"} is set)`);
  return { cert: config.tlsCert, key: config.tlsKey, clientCa: config.tlsClientCa };
}

export function readPem(setting: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new Error(`${setting} ${file}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (e as Error).message}`);
  }
}

/** grpc-js server credentials whose context can be replaced while the server runs. */
class ReloadableServerCredentials extends grpc.ServerCredentials {
  constructor(requireClientCertificate: boolean, context: SecureContextOptions) {
    super({ requestCert: requireClientCertificate, rejectUnauthorized: requireClientCertificate }, context);
  }

  replace(context: SecureContextOptions): void {
    this.updateSecureContextOptions(context);
  }

  _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}

export class TlsMaterial {
  private context: SecureContextOptions;
  private readonly listeners: Array<(context: SecureContextOptions) => void> = [];
  readonly grpcCredentials: ReloadableServerCredentials;

  constructor(private readonly files: { cert: string; key: string; clientCa: string }) {
    this.context = this.read();
    this.grpcCredentials = new ReloadableServerCredentials(this.mutual, this.context);
  }

  get mutual(): boolean {
    return this.files.clientCa !== "";
  }

  /** Options for https.createServer. */
  get httpsOptions(): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean } {
    return { ...this.context, requestCert: this.mutual, rejectUnauthorized: this.mutual };
  }

  /**
   * Credentials for this node's calls to the other nodes (forwarding/peers.ts), which serve
   * TLS as this node does: trusting `peerCa` (`cluster_tls_ca`; undefined: grpc's default
   * roots), and under mTLS presenting this node's own certificate as its client
   * certificate (the others require one; it needs the clientAuth use when it lists uses).
   * Taken when a peer channel opens, so channels opened after a reload use the new files.
   */
  peerCredentials(peerCa: Buffer | undefined): grpc.ChannelCredentials {
    if (!this.mutual) return grpc.credentials.createSsl(peerCa ?? null);
    return grpc.credentials.createSsl(peerCa ?? null, this.context.key as Buffer, this.context.cert as Buffer);
  }

  onReload(listener: (context: SecureContextOptions) => void): void {
    this.listeners.push(listener);
  }

  /** The files to watch for a change. */
  get paths(): string[] {
    return [this.files.cert, this.files.key, ...(this.mutual ? [this.files.clientCa] : [])];
  }

  /** Reads the files again; throws (keeping the current context) when they are not usable. */
  reload(): void {
    this.apply(this.read());
  }

  /** Reloads when the files' bytes differ from the served ones; returns whether it did. Throws (keeping the current context) as reload does. */
  reloadIfChanged(): boolean {
    const next = this.readFiles();
    const same = (a: unknown, b: unknown) => Buffer.isBuffer(a) && Buffer.isBuffer(b) ? a.equals(b) : a === b;
    if (same(next.cert, this.context.cert) && same(next.key, this.context.key) && same(next.ca, this.context.ca)) return false;
    this.apply(this.checked(next));
    return true;
  }

  private apply(context: SecureContextOptions): void {
    this.context = context;
    this.grpcCredentials.replace(context);
    for (const listener of this.listeners) listener(context);
  }

  private read(): SecureContextOptions {
    return this.checked(this.readFiles());
  }

  private readFiles(): SecureContextOptions {
    const context: SecureContextOptions = { cert: readPem("tls_cert", this.files.cert), key: readPem("tls_key", this.files.key) };
    if (this.mutual) context.ca = readPem("tls_client_ca", this.files.clientCa);
    return context;
  }

  private checked(context: SecureContextOptions): SecureContextOptions {
    try {
      createSecureContext(context); // a key that does not match the certificate fails here, not at the first handshake
    } catch (e) {
      throw new Error(`tls_cert ${this.files.cert} / tls_key ${this.files.key}: ${(e as Error).message}`);
    }
    return context;
  }
}
