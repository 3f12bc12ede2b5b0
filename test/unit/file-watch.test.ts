/**
 * The security files' watch: a file written in place is seen, so is one replaced by
 * rename (how renewers write), and so are writes after the rename (the folder is
 * watched, not the replaced file's inode).
 */
import { mkdtempSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { watchFiles } from "../../src/server/security/file-watch.js";

describe("watchFiles", () => {
  it("calls back after a write in place and after a replacement by rename", async () => {
    const dir = mkdtempSync(join(tmpdir(), "conveyor-watch-"));
    const file = join(dir, "node.crt");
    writeFileSync(file, "one");
    let calls = 0;
    let wake = () => {};
    const errors: Error[] = [];
    const watch = watchFiles([file], () => {
      calls++;
      wake();
    }, (e) => errors.push(e));
    const nextCall = () => new Promise<void>((resolve) => (wake = resolve));
    try {
      let called = nextCall();
      writeFileSync(file, "two");
      await called;
      expect(calls).toBeGreaterThanOrEqual(1);
      called = nextCall();
      writeFileSync(join(dir, "node.crt.tmp"), "three");
      renameSync(join(dir, "node.crt.tmp"), file);
      await called;
      expect(calls).toBeGreaterThanOrEqual(2);
      // The watch follows the folder, so the renamed-over file is still watched.
      called = nextCall();
      writeFileSync(file, "four");
      await called;
      expect(calls).toBeGreaterThanOrEqual(3);
      expect(errors).toEqual([]);
    } finally {
      watch.close();
    }
  });
});
