/**
 * Human durations for the CLI and config: "150ms", "5s", "2m", "1h", "1d", or a
 * combination such as "1m30s". A bare number is milliseconds.
 */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDurationMs(text: string): number {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const part = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let consumed = 0;
  for (let m = part.exec(trimmed); m; m = part.exec(trimmed)) {
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    consumed = part.lastIndex;
  }
  if (trimmed === "" || consumed !== trimmed.length) {
    throw new Error(`invalid duration ${JSON.stringify(text)}: use e.g. 500ms, 5s, 2m, 1h, 1d`);
  }
  return Math.round(total);
}

/** The shortest readable form: 90000 → "1m30s", 1500 → "1.5s", 20 → "20ms". */
export function formatDurationMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(1)}s`;
  const parts: string[] = [];
  let rest = Math.round(ms / 1000);
  for (const [unit, size] of [["d", 86_400], ["h", 3_600], ["m", 60], ["s", 1]] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join("");
}
