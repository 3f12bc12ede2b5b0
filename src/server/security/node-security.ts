/**
 * The node's security, assembled for the composition root: `loadSecurity` reads the auth
 * file and applies the fail-closed rule before anything else starts (a refusal leaves the
 * data directory untouched); `NodeSecurity` then guards the services and gates the HTTP port.
 */
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { UnaryImpl } from "../../rpc/service-definition.js";
import type { NodeConfig } from "../config.js";
import type { HttpRoute } from "../http.js";
import { loadAuthFile } from "./auth-file.js";
import { exposureRefusal, INSECURE_FLAG } from "./exposure.js";
import { AuthFailures } from "./failures.js";
import { guardService } from "./guard.js";
import { httpGate } from "./http-gate.js";
import { Authenticator } from "./identity.js";
import { tlsFilesOf, TlsMaterial, type TlsSettings } from "./tls.js";

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
}

export function loadSecurity(
  config: Pick<NodeConfig, "authFile" | "listen" | "http"> & TlsSettings, options: SecurityOptions, logger: Logger,
): LoadedSecurity {
  let authn: Authenticator;
  let tls: TlsMaterial | undefined;
  try {
    authn = new Authenticator(config.authFile ? loadAuthFile(config.authFile) : undefined);
    const files = tlsFilesOf(config);
    tls = files ? new TlsMaterial(files) : undefined;
  } catch (e) {
    throw new SecurityConfigError((e as Error).message);
  }
  const refusal = exposureRefusal({ grpc: config.listen, http: config.http }, authn.enabled, options.allowUnauthenticatedNetwork === true);
  if (refusal) throw new SecurityConfigError(refusal);
  if (!authn.enabled && options.allowUnauthenticatedNetwork) {
    logger.warn({ grpc: config.listen, http: config.http },
      `${INSECURE_FLAG}: NO AUTHENTICATION. Anyone who can reach these ports can read every task and change anything`);
  }
  return { authn, tls };
}

export class NodeSecurity {
  private readonly failures: AuthFailures;

  constructor(
    readonly authn: Authenticator,
    readonly tls: TlsMaterial | undefined,
    private readonly env: { registry: Registry; logger: Logger; config: Pick<NodeConfig, "http" | "httpAllowedHosts"> },
  ) {
    this.failures = new AuthFailures(env.registry, env.logger);
  }

  guard<S extends GenService<GenServiceMethods>>(service: S, impl: UnaryImpl<S>): UnaryImpl<S> {
    return guardService(service, impl, { authn: this.authn, failures: this.failures, logger: this.env.logger });
  }

  httpGate(httpAddress: string): HttpRoute {
    return httpGate({
      authn: this.authn, failures: this.failures, httpAddress,
      allowedHosts: this.env.config.httpAllowedHosts.split(","),
    });
  }
}
