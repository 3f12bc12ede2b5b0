/**
 * The manual stays true to the code and navigable:
 * - every generated reference page (docs/reference/, scripts/docs-reference.ts) is what the
 *   generator writes from today's code;
 * - every relative link in README.md, ARCHITECTURE.md, CONTRIBUTING.md and docs/**\/*.md
 *   resolves: its file exists and its #anchor is a heading there (GitHub's slugs);
 * - the error catalog's REASON_CODES agree with every `new ConveyorError(code, reason, ...)`.
 * docs/_incoming/ holds drafts other branches write, folded in later: not checked here.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT, generatedPages } from "../../scripts/docs-reference.js";
import { REASON_CODES } from "../../src/base/errors.js";

const read = (path: string) => readFileSync(join(REPO_ROOT, path), "utf8");

function filesUnder(dir: string, test: (name: string) => boolean): string[] {
  return readdirSync(join(REPO_ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(REPO_ROOT, path)).isDirectory()) return name === "_incoming" ? [] : filesUnder(path, test);
    return test(name) ? [path] : [];
  });
}

const DOCUMENTS = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", ...filesUnder("docs", (n) => n.endsWith(".md"))];

/** Markdown without fenced code blocks and inline code, where link syntax means nothing. */
const withoutCode = (text: string) => text.replace(/^(```|~~~)[\s\S]*?^\1/gm, "").replace(/`[^`\n]*`/g, "");

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of withoutCode(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = heading!.replace(/`/g, "").replace(/\[([^\]]*)\]\([^)]*\)/g, "$1");
    const slug = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  for (const [, id] of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(id!);
  return anchors;
}

describe("docs", () => {
  it("every generated reference page is current (npm run docs regenerates them)", () => {
    for (const [path, content] of Object.entries(generatedPages())) {
      const current = existsSync(join(REPO_ROOT, path)) ? read(path) : "(missing)";
      expect(current === content, `${path} is stale: run npm run docs`).toBe(true);
    }
  }, 120_000);

  it("every relative link in the docs resolves, file and #anchor", () => {
    expect(DOCUMENTS.length).toBeGreaterThan(20);
    const broken: string[] = [];
    for (const doc of DOCUMENTS) {
      const text = read(doc);
      for (const [, target] of withoutCode(text).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue; // https:, mailto:
        const [path, anchor] = target!.split("#", 2) as [string, string | undefined];
        const file = path === "" ? join(REPO_ROOT, doc) : resolve(REPO_ROOT, dirname(doc), decodeURIComponent(path));
        const shown = `${doc}: ${target}`;
        if (!file.startsWith(REPO_ROOT) || !existsSync(file)) { broken.push(`${shown} (no such file)`); continue; }
        if (anchor === undefined || anchor === "") continue;
        if (!file.endsWith(".md")) { broken.push(`${shown} (an anchor into a file that is not Markdown)`); continue; }
        if (!anchorsOf(readFileSync(file, "utf8")).has(anchor)) broken.push(`${shown} (no heading #${anchor} in ${relative(REPO_ROOT, file)})`);
      }
    }
    expect(broken, broken.join("\n")).toEqual([]);
  });

  it("the error catalog's codes are the ones the code sends each reason with", () => {
    const codes = REASON_CODES as Record<string, string>;
    // Node-to-node handoff transfers out of order: a protocol state, not a caller's field.
    const exceptions = new Set(["src/server/handoff/cluster-service.ts FAILED_PRECONDITION INVALID_FIELD"]);
    const wrong: string[] = [];
    for (const file of [...filesUnder("src", (n) => n.endsWith(".ts")), ...filesUnder("cli", (n) => n.endsWith(".ts"))]) {
      if (file.startsWith("src/gen/")) continue;
      for (const [, code, reason] of read(file).matchAll(/new ConveyorError\(\s*"([A-Z_]+)",\s*"([A-Z_]+)"/g)) {
        if (codes[reason!] === undefined || codes[reason!] === code) continue;
        if (!exceptions.has(`${file} ${code} ${reason}`)) wrong.push(`${file}: ${reason} sent as ${code}, catalog says ${codes[reason!]}`);
      }
    }
    expect(wrong, wrong.join("\n")).toEqual([]);
  });
});
