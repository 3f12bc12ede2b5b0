/** Fail closed: a node on a non-loopback address without authentication refuses to start, touching nothing. */
import { describe, expect, it } from "vitest";
import { writeFileSync } from "node:fs";
import { authFileWithRoles, startOutcome } from "../support/security.js";

describe("startup refusal", () => {
  it("refuses a non-loopback gRPC or HTTP address without auth, naming the fix, and leaves the data dir empty", async () => {
    for (const args of [["--listen", "0.0.0.0:0", "--http", "127.0.0.1:0"], ["--listen", "127.0.0.1:0", "--http", "[::]:0"]]) {
      const out = await startOutcome(args);
      expect(out.started, args.join(" ")).toBe(false);
      expect(out.code).toBe(1);
      expect(out.stderr).toMatch(/refusing to start: .* no authentication is configured\. Set auth_file .* --insecure-allow-unauthenticated-network/);
      expect(out.dataDirFiles).toEqual([]);
    }
  });

  it("starts on a non-loopback address with an auth file, or with the loud flag (and warns)", async () => {
    const auth = authFileWithRoles();
    const withAuth = await startOutcome(["--listen", "0.0.0.0:0", "--http", "127.0.0.1:0", "--set", `auth_file=${auth.file}`]);
    expect(withAuth.started, withAuth.stderr).toBe(true);
    const flagged = await startOutcome(["--listen", "0.0.0.0:0", "--http", "127.0.0.1:0", "--insecure-allow-unauthenticated-network"]);
    expect(flagged.started, flagged.stderr).toBe(true);
    expect(flagged.logs).toContain("NO AUTHENTICATION");
  });

  it("refuses an auth file with a mistake, naming the entry", async () => {
    const auth = authFileWithRoles();
    writeFileSync(auth.file, "tokens:\n  - name: ci\n    sha256: " + "a".repeat(64) + "\n    roles: [producer, wrtier]\n");
    const out = await startOutcome(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--set", `auth_file=${auth.file}`]);
    expect(out.started).toBe(false);
    expect(out.stderr).toContain('tokens[0] (ci): unknown role "wrtier"; known: admin, producer, worker, reader');
    expect(out.dataDirFiles).toEqual([]);
    writeFileSync(auth.file, "tokens:\n  - name: ci\n    sha256: cvy_plaintext\n    roles: [producer]\n");
    const plain = await startOutcome(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--set", `auth_file=${auth.file}`]);
    expect(plain.stderr).toContain("sha256 must be 64 hex digits");
  });
});
