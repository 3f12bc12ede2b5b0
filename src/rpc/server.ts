import * as grpc from "@grpc/grpc-js";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { toGrpcDefinition, type UnaryImpl } from "./service-definition.js";
import { toServiceError } from "./status.js";
import { decodeRequest, UndecodableRequest } from "./request-decode.js";

/**
 * Registers promise-returning handlers for a unary-only service. A rejected handler
 * becomes a gRPC status (ConveyorError → its code; anything else → INTERNAL, reported
 * through `onInternal` and never sent). A request that does not decode is answered
 * INVALID_ARGUMENT without running the handler.
 */
export function addUnaryService<S extends GenService<GenServiceMethods>>(
  server: grpc.Server,
  service: S,
  impl: UnaryImpl<S>,
  onInternal: (method: string, error: unknown) => void,
  observe?: (method: string, code: grpc.status, seconds: number) => void,
): void {
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const [name, fn] of Object.entries(impl as Record<string, (call: unknown) => Promise<unknown>>)) {
    handlers[name] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const started = performance.now();
      const request = call.request;
      const run = request instanceof UndecodableRequest ? Promise.reject(request.error) : fn(call);
      run.then(
        (response) => {
          callback(null, response);
          observe?.(name, grpc.status.OK, (performance.now() - started) / 1000);
        },
        (error: unknown) => {
          const status = toServiceError(error);
          if (status.code === grpc.status.INTERNAL) onInternal(name, error);
          callback(status);
          observe?.(name, status.code ?? grpc.status.UNKNOWN, (performance.now() - started) / 1000);
        },
      );
    };
  }
  server.addService(toGrpcDefinition(service, decodeRequest), handlers);
}
