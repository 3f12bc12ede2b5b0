/** Client TLS credentials (grpc-js stays inside src/rpc): the CA to trust and, for mTLS, the client's certificate and key. */
import * as grpc from "@grpc/grpc-js";

export interface ClientTlsPem {
  ca?: Buffer | undefined;
  cert?: Buffer | undefined;
  key?: Buffer | undefined;
}

export function clientTlsCredentials(pem: ClientTlsPem): grpc.ChannelCredentials {
  return grpc.credentials.createSsl(pem.ca ?? null, pem.key ?? null, pem.cert ?? null);
}
