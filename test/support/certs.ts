/**
 * Certificates for TLS tests, made by openssl on the spot (no private key is checked in):
 * a CA, a server certificate for 127.0.0.1 and localhost signed by it, client
 * certificates with a chosen subject CN, and a second CA nobody trusts.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const openssl = (args: string[], cwd: string) => execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });

export interface CertFiles {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  /** A CA that signed nothing the node serves. */
  otherCaCert: string;
  /** Makes a client certificate with subject CN=`cn`, signed by the CA (or the other CA). */
  client(cn: string, signer?: "ca" | "other"): { cert: string; key: string };
  /** Makes another server certificate signed by the CA (to swap in and reload). */
  server(name: string, sans: string): { cert: string; key: string };
  /** Makes a cluster node's certificate signed by the CA: a server's that may also be a client's (nodes call each other with it under mTLS). */
  node(name: string, sans: string): { cert: string; key: string };
  read(file: string): Buffer;
}

export function makeCerts(): CertFiles {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-certs-"));
  const ca = (name: string) => {
    openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
      "-subj", `/CN=${name}`, "-keyout", `${name}.key`, "-out", `${name}.crt`], dir);
  };
  ca("test-ca");
  ca("other-ca");
  const sign = (name: string, subject: string, extensions: string, signer: string) => {
    openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject,
      "-keyout", `${name}.key`, "-out", `${name}.csr`], dir);
    writeFileSync(join(dir, `${name}.ext`), extensions);
    openssl(["x509", "-req", "-in", `${name}.csr`, "-CA", `${signer}.crt`, "-CAkey", `${signer}.key`, "-CAcreateserial",
      "-days", "2", "-extfile", `${name}.ext`, "-out", `${name}.crt`], dir);
    return { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  };
  const server = (name: string, sans: string) => sign(name, `/CN=${name}`, `subjectAltName=${sans}\nextendedKeyUsage=serverAuth\n`, "test-ca");
  const s = server("server", "IP:127.0.0.1,DNS:localhost");
  return {
    dir, caCert: join(dir, "test-ca.crt"), otherCaCert: join(dir, "other-ca.crt"), serverCert: s.cert, serverKey: s.key,
    client: (cn, signer = "ca") => sign(`client-${cn}-${signer}`, `/CN=${cn}`, "extendedKeyUsage=clientAuth\n", signer === "ca" ? "test-ca" : "other-ca"),
    server,
    node: (name, sans) => sign(name, `/CN=${name}`, `subjectAltName=${sans}\nextendedKeyUsage=serverAuth,clientAuth\n`, "test-ca"),
    read: (file) => readFileSync(file),
  };
}
