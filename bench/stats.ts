/** Percentiles and the text formatting of results. */

export interface Summary {
  count: number;
  min: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** The p-th percentile (0..100) of ascending `sorted`, linearly interpolated. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

export function summarize(values: readonly number[]): Summary {
  const sorted = Float64Array.from(values).sort();
  const arr = Array.from(sorted);
  let sum = 0;
  for (const v of arr) sum += v;
  return {
    count: arr.length,
    min: arr[0] ?? Number.NaN,
    mean: arr.length ? sum / arr.length : Number.NaN,
    p50: percentile(arr, 50),
    p90: percentile(arr, 90),
    p99: percentile(arr, 99),
    max: arr.at(-1) ?? Number.NaN,
  };
}

/**
 * The most intervals [start, end) open at once: an interval that ends at the instant
 * another starts does not overlap it. Intervals with a NaN bound are ignored.
 */
export function maxOverlap(starts: readonly number[], ends: readonly number[]): number {
  const events: Array<[number, number]> = [];
  for (let i = 0; i < starts.length; i++) {
    if (Number.isNaN(starts[i]) || Number.isNaN(ends[i])) continue;
    events.push([starts[i]!, 1], [ends[i]!, -1]);
  }
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let max = 0;
  for (const [, d] of events) {
    open += d;
    if (open > max) max = open;
  }
  return max;
}

/** 12345.6 → "12,346"; small numbers keep a few significant digits. */
export function fmtNum(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return "-";
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString("en-US");
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

export function fmtMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return "-";
  if (ms >= 100) return ms.toFixed(0);
  if (ms >= 10) return ms.toFixed(1);
  return ms.toFixed(2);
}

/** A plain text table: left-aligned text columns, right-aligned numeric ones. */
export function renderTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>, rightAligned: ReadonlySet<number>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (rightAligned.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ").trimEnd();
  const rule = widths.map((w) => "-".repeat(w)).join("  ");
  return [line(header), rule, ...rows.map(line)].join("\n");
}
