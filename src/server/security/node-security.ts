/**
 * The node's security, assembled for the composition root: `loadSecurity` reads the auth
 * file and applies the fail-closed rule before anything else starts (a refusal leaves the
 * data directory untouched); `NodeSecurity` then guards the services, gates the HTTP port,
 * and reloads the TLS and auth files on SIGHUP or when they change (reload.ts).
 */
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { UnaryImpl } from "../../rpc/service-definition.js";
import type { NodeConfig } from "../config.js";
import type { HttpRoute } from "../http.js";
import { readAuthFile } from "./auth-file.js";
import { ClusterSecret, ClusterSecretHolder } from "./cluster-secret.js";
import { exposureRefusal, INSECURE_FLAG } from "./exposure.js";
import { AuthFailures } from "./failures.js";
import type { Admit } from "../../rpc/admission.js";
import { grpcAdmission } from "./admission.js";
import { guardService } from "./guard.js";
import { httpGate } from "./http-gate.js";
import type { FileWatch } from "./file-watch.js";
import { Authenticator } from "./identity.js";
import { SecurityReloader, type ReloadTrigger } from "./reload.js";
import * as grpc from "@grpc/grpc-js";
import { readPem, tlsFilesOf, TlsMaterial, type TlsSettings } from "./tls.js";

export interface SecurityOptions {
  /** The operator passed --insecure-allow-unauthenticated-network. */
  allowUnauthenticatedNetwork?: boolean;
}

/** Thrown when the node must not start as configured; main prints the message alone. */
export class SecurityConfigError extends Error {}

/** What the node's transports need: who is who, and the TLS material (when TLS is on). */
export interface LoadedSecurity {
  authn: Authenticator;
  tls: TlsMaterial | undefined;
  /** The auth file and the text loaded from it (undefined: auth is off). */
  authFile: { path: string; text: string } | undefined;
  /** The cluster secret in force and its file (undefined: none configured). */
  clusterSecret: { path: string; holder: ClusterSecretHolder } | undefined;
  /** `cluster_tls_ca`: what the other nodes' certificates chain to (undefined: the default roots). */
  peerCa: Buffer | undefined;
}

export function loadSecurity(
  config: Pick<NodeConfig, "authFile" | "listen" | "http" | "clusterEtcd" | "clusterSecretFile" | "clusterTlsCa"> & TlsSettings, options: SecurityOptions, logger: Logger,
): LoadedSecurity {
  let authn: Authenticator;
  let tls: TlsMaterial | undefined;
  let authFile: LoadedSecurity["authFile"];
  let clusterSecret: LoadedSecurity["clusterSecret"];
  let peerCa: Buffer | undefined;
  try {
    const auth = config.authFile ? readAuthFile(config.authFile) : undefined;
    clusterSecret = config.clusterSecretFile
      ? { path: config.clusterSecretFile, holder: new ClusterSecretHolder(ClusterSecret.read(config.clusterSecretFile)) }
      : undefined;
    authn = new Authenticator(auth?.policy, clusterSecret?.holder);
    authFile = auth && { path: config.authFile, text: auth.text };
    const files = tlsFilesOf(config);
    tls = files ? new TlsMaterial(files) : undefined;
    if (config.clusterTlsCa && !tls) throw new Error("cluster_tls_ca is set but tls_cert and tls_key are not: nodes call each other with TLS only when they serve it");
    peerCa = config.clusterTlsCa ? readPem("cluster_tls_ca", config.clusterTlsCa) : undefined;
  } catch (e) {
    throw new SecurityConfigError((e as Error).message);
  }
  // Better refused now than every handoff and forwarded call refused later.
  if (authn.enabled && config.clusterEtcd.trim() !== "" && !clusterSecret) {
    throw new SecurityConfigError("auth_file is set and cluster_etcd makes this node a cluster member, but cluster_secret_file is not set: " +
      "the nodes could not authenticate to each other, so no partition could move and no call could be forwarded. " +
      "Make a secret with `conveyord cluster-secret > cluster.secret`, give every node the same file, and set cluster_secret_file");
  }
  const refusal = exposureRefusal({ grpc: config.listen, http: config.http }, authn.enabled, options.allowUnauthenticatedNetwork === true);
  if (refusal) throw new SecurityConfigError(refusal);
  if (!authn.enabled && options.allowUnauthenticatedNetwork) {
    logger.warn({ grpc: config.listen, http: config.http },
      `${INSECURE_FLAG}: NO AUTHENTICATION. Anyone who can reach these ports can read every task and change anything`);
  }
  return { authn, tls, authFile, clusterSecret, peerCa };
}

export class NodeSecurity {
  readonly authn: Authenticator;
  readonly tls: TlsMaterial | undefined;
  /** The secret this node presents to the others (undefined: none configured). */
  readonly presentedClusterSecret: () => string | undefined;
  /** Channel credentials for calls to the other nodes: TLS when this node serves TLS (they share its settings). */
  readonly peerCredentials: () => grpc.ChannelCredentials;
  private readonly failures: AuthFailures;
  private readonly reloader: SecurityReloader;
  private fileWatch: FileWatch | undefined;

  constructor(
    loaded: LoadedSecurity,
    private readonly env: {
      registry: Registry; logger: Logger; config: Pick<NodeConfig, "http" | "httpAllowedHosts">;
      /** The queue holding a task (the task store's index): scoped calls that name a task by id. */
      queueOfTask: (id: string) => string | undefined;
    },
  ) {
    this.authn = loaded.authn;
    this.tls = loaded.tls;
    const holder = loaded.clusterSecret?.holder;
    this.presentedClusterSecret = () => holder?.secret.presented;
    const { tls, peerCa } = loaded;
    this.peerCredentials = () => (tls ? tls.peerCredentials(peerCa) : grpc.credentials.createInsecure());
    this.failures = new AuthFailures(env.registry, env.logger);
    this.reloader = new SecurityReloader({ ...loaded, logger: env.logger });
  }

  guard<S extends GenService<GenServiceMethods>>(service: S, impl: UnaryImpl<S>): UnaryImpl<S> {
    return guardService(service, impl, { authn: this.authn, failures: this.failures, logger: this.env.logger, queueOfTask: this.env.queueOfTask });
  }

  /** Reads the TLS and auth files again (SIGHUP, or a change the watch saw); what fails to load keeps what is in force. */
  reload(trigger: ReloadTrigger): void {
    this.reloader.reload(trigger);
  }

  /** Starts reloading the files when they change on disk, until close(). */
  watchFiles(): void {
    this.fileWatch ??= this.reloader.watch();
  }

  close(): void {
    this.fileWatch?.close();
    this.fileWatch = undefined;
  }

  /** Refuses a gRPC call on its headers, before its message is decoded (admission.ts). */
  grpcAdmission(): Admit {
    return grpcAdmission({ authn: this.authn, failures: this.failures });
  }

  httpGate(httpAddress: string): HttpRoute {
    return httpGate({
      authn: this.authn, failures: this.failures, httpAddress,
      allowedHosts: this.env.config.httpAllowedHosts.split(","),
    });
  }
}
