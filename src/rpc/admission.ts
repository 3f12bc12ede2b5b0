/**
 * Refuses a gRPC call on its headers, before its message is read or decoded. grpc-js
 * decodes a request before any handler runs, and decoding 4 MiB costs up to hundreds of
 * milliseconds of the node's only thread; credentials travel in the headers (metadata and
 * the TLS peer), so a caller who could never be served is answered without that work.
 *
 * A server interceptor sees the metadata first: when `admit` refuses, the call ends with
 * that status and the handler never starts reading (grpc-js keeps the stream paused
 * until it does, and drops what arrives after the status). What `admit` checks is the
 * server's business (security/admission.ts); the guard still runs on every call it lets
 * through, so this is an early copy of the guard's first checks, never a replacement.
 */
import * as grpc from "@grpc/grpc-js";
import { toServiceError } from "./status.js";

/** What the interceptor knows of a call before its message: enough to authenticate it. */
export interface CallHeaders {
  /** `/package.Service/Method`. */
  path: string;
  metadata: grpc.Metadata;
  peer: string;
  /** The subject CN of a client certificate the TLS layer verified, if any. */
  peerCommonName: string | undefined;
}

/** The refusal (a ConveyorError, sent as its status), or undefined to let the call through. */
export type Admit = (call: CallHeaders) => Error | undefined;

export function admissionInterceptor(admit: Admit): grpc.ServerInterceptor {
  return (method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start: (next) => next({
        onReceiveMetadata: (metadata, pass) => {
          let refusal: Error | undefined;
          try {
            refusal = admit({ path: method.path, metadata, peer: call.getPeer(), peerCommonName: commonNameOf(call.getAuthContext()) });
          } catch (error) {
            refusal = error instanceof Error ? error : new Error(String(error));
          }
          if (refusal === undefined) pass(metadata);
          else {
            const status = toServiceError(refusal);
            call.sendStatus({ code: status.code ?? grpc.status.UNKNOWN, details: status.details ?? "", ...(status.metadata ? { metadata: status.metadata } : {}) });
          }
        },
      }),
    });
}

function commonNameOf(context: { sslPeerCertificate?: { subject?: { CN?: string | string[] } } | undefined } | undefined): string | undefined {
  const cn = context?.sslPeerCertificate?.subject?.CN;
  return Array.isArray(cn) ? cn[0] : cn || undefined;
}
