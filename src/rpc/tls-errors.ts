/**
 * grpc-js reports a failed TLS handshake as a bare UNAVAILABLE ("No connection
 * established. Last error: Error: unable to verify the first certificate"), which reads
 * like a node that is down. These patterns name what is wrong instead; the client's
 * status mapping (status.ts) uses them for connection failures only.
 */
const FAILURES: Array<{ pattern: RegExp; explain: string }> = [
  {
    pattern: /unable to verify|self[- ]signed certificate|unable to get (local )?issuer|certificate has expired|certificate is not yet valid/i,
    explain: "certificate not trusted: the node's certificate does not chain to the CA the client trusts (SDK tls.ca, CLI --ca)",
  },
  {
    pattern: /does not match certificate's altnames|Hostname\/IP does not match/i,
    explain: "host name does not match the node's certificate: dial a name or address its subjectAltName lists",
  },
  {
    pattern: /alert (certificate required|bad certificate|unknown ca|handshake failure)|peer did not return a certificate/i,
    explain: "the node refused the TLS handshake: it requires a client certificate signed by its tls_client_ca (SDK tls.cert and tls.key, CLI --cert and --key)",
  },
];

/** A worded TLS failure for a transport error message, or undefined when it is not one. */
export function explainTlsFailure(message: string): string | undefined {
  const found = FAILURES.find((f) => f.pattern.test(message));
  return found ? `${found.explain} (${message.replace(/^No connection established\. Last error: (Error: )?/, "").replace(/\. Resolution note: .*$/s, "")})` : undefined;
}
